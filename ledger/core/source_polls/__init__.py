"""Source polls, the pure part: a source's poll events, their fold (the last poll, its result
and the source's breaker) and the decisions a poll makes from that fold
(``docs/operations.md``, "Source polls").

Pure like the rest of :mod:`ledger.core`: no store, driver or clock. The ledger runs a poll
(:mod:`ledger.sources.source_polls`); the worker runs it as the built-in job type
``jobledger.source_poll`` (:mod:`ledger.runtime.source_poller`).
"""
