"""Read models derived from the event history: their row mappings and (later) their runners."""
