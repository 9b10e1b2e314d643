"""Job definitions kept in step with the handlers registered for them.

A handler may carry options its job type should be defined with (``max_attempts``,
``timeout_s``, ``backoff``). A pool applies them at start (``define_types=True``) so that an
enqueue resolves the job's defaults from the code that will run it.
"""

from __future__ import annotations

from typing import Any

from ledger.api.ledger import Ledger
from ledger.runtime.handlers import HandlerSpec, Registry


def sync_definitions(ledger: Ledger, registry: Registry) -> None:
    """Define every registered type that is undefined; redefine one whose handler sets options.

    A redefinition keeps the definition's other fields (priority, enabled…) as they are;
    redefining identically appends nothing, so every pool of a deployment may run this at
    start. Blocking: call it in a thread from a running loop.
    """
    for spec in registry.specs():
        current = ledger.definition(spec.job_type)
        overrides = _handler_options(spec)
        if current is None:
            ledger.define(spec.job_type, **overrides)
        elif overrides:
            fields = {
                "version": current.version,
                "max_attempts": current.max_attempts,
                "default_timeout_s": current.default_timeout_s,
                "default_priority": current.default_priority,
                "enabled": current.enabled,
                "backoff": current.backoff,
                **overrides,
            }
            ledger.define(spec.job_type, **fields)


def _handler_options(spec: HandlerSpec) -> dict[str, Any]:
    """The definition fields the handler sets, under the definition's names."""
    options: dict[str, Any] = {}
    if spec.max_attempts is not None:
        options["max_attempts"] = spec.max_attempts
    if spec.timeout_s is not None:
        options["default_timeout_s"] = spec.timeout_s
    if spec.backoff is not None:
        options["backoff"] = spec.backoff
    return options
