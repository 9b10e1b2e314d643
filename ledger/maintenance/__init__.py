"""Maintenance services run on intervals: the reaper."""
