"""For developers of this package: fast-import histories, the bundled example, the benchmark."""
