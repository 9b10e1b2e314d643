"""The built-in ``jobledger.source_poll`` handler: a pool whose registry has source listers
serves that job type, so a cron schedule enqueueing ``{"source": NAME}`` is all a periodic
poll needs (``jobledger sources poll NAME`` enqueues one by hand).

The job runs :meth:`ledger.api.ledger.Ledger.sources.poll` with the registered lister. Its
outcome is the source's, recorded in the source's own stream (polled, failed, skipped), and
the job *succeeds* with that outcome as its output even when the lister failed: retrying the
job would poll a failing source again behind its breaker's back, and the next poll is the
schedule's to make. The job fails only when the ledger could not record the poll (the store's
errors, retried like any job's) or when no lister for the source is registered here
(``source.not_registered``, permanent).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ledger.api.ledger import Ledger
from ledger.core.source_polls.decide import POLL_JOB_MAX_ATTEMPTS, POLL_JOB_TIMEOUT_S, SourcePoll
from ledger.core.source_polls.events import SOURCE_POLL_JOB_TYPE
from ledger.runtime.handlers import HandlerSpec, PermanentError, Registry, SyncJobContext

NOT_REGISTERED = "source.not_registered"


def with_source_polls(registry: Registry, ledger: Ledger) -> Registry:
    """``registry`` as a pool over ``ledger`` serves it: with the ``jobledger.source_poll``
    handler added when it has listers (a copy: the caller's registry is left as it is). A
    handler the application registered for that type itself is kept."""
    if not registry.sources() or registry.get(SOURCE_POLL_JOB_TYPE) is not None:
        return registry
    served = replace(registry, _handlers=dict(registry._handlers))

    def poll(ctx: SyncJobContext) -> dict[str, Any]:
        name = ctx.payload.get("source")
        spec = registry.source_spec(name) if isinstance(name, str) else None
        if spec is None:
            raise PermanentError(
                f"no lister for source {name!r} is registered in this worker "
                f"(registered: {', '.join(s.name for s in registry.sources())})",
                code=NOT_REGISTERED,
            )
        return poll_output(
            ledger.sources.poll(spec.name, spec.list, spec.config, poll_job_id=ctx.id)
        )

    served._handlers[SOURCE_POLL_JOB_TYPE] = HandlerSpec(
        job_type=SOURCE_POLL_JOB_TYPE,
        function=poll,
        is_async=False,
        max_attempts=POLL_JOB_MAX_ATTEMPTS,
        timeout_s=POLL_JOB_TIMEOUT_S,
    )
    return served


def poll_output(poll: SourcePoll) -> dict[str, Any]:
    """A poll job's output (and ``sources poll --run-now --json``'s): the source, how the
    poll ended and its counts, error or skip reason."""
    state = poll.state
    output: dict[str, Any] = {"source": poll.source, "result": poll.result.value}
    if poll.sync is not None and state.last_counts is not None:
        counts = state.last_counts
        output.update(
            upserted=counts.upserted,
            unchanged=counts.unchanged,
            deleted=counts.deleted,
            enqueued=counts.enqueued,
            already_live=counts.already_live,
        )
    elif poll.result.value == "failed":
        output.update(error=state.last_error, code=state.last_error_code, failures=state.failures)
        output["breaker_until"] = None if not state.breaker_open else str(state.breaker_until)
    else:
        output.update(reason=state.last_skip_reason, code=state.last_skip_code)
    return output
