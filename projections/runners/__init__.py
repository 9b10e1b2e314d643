"""The projection runners that do I/O: rebuild, verify, follow, stats."""
