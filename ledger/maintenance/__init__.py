"""Maintenance services (the reaper) and the runner that runs them on their intervals."""
