"""The imperative shell: event store and inline views on SQLite and PostgreSQL."""
