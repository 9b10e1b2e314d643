"""The worker runtime: the pool and the pieces it wires together."""
