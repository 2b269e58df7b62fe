"""Infrastructure: errors and exit codes, atomic writes, the lock and the write journal,
globs, the one process runner, notes."""
