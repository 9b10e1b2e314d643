"""Pure projection rules and query shapes: rows from events, no I/O."""
