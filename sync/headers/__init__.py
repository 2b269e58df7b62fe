"""Per-file pin headers: comment styles, the citation grammar, SHA verification."""
