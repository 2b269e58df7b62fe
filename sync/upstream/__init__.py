"""The upstream: the one git wrapper, history enumeration, fetch."""
