"""Cron schedules, the pure part: a schedule's events and fold, its slots (cron expressions
read by ``cronsim`` in a time zone) and the catch-up decision (``docs/schedules.md``).

Pure like the rest of :mod:`ledger.core`: no store, driver or clock. The store writes the
schedules view from the fold; the scheduler service (:mod:`ledger.maintenance.scheduler`)
asks :func:`ledger.core.schedules.catch_up.plan_pass` what a pass fires and misses.
"""
