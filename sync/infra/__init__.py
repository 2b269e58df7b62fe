"""Infrastructure: errors and exit codes, atomic writes and locks, globs."""
