"""Cron schedules, as a feature namespace: add, pause, resume and remove them, and the
scheduler's pass that fires their due slots (what :attr:`Ledger.schedules
<ledger.api.ledger.Ledger.schedules>` hands out)."""
