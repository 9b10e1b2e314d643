"""Job definitions and the handlers registered for them: who wins when they disagree.

A handler may carry options its job type should be defined with (``max_attempts``,
``timeout_s``, ``backoff``). A pool applies them at start (``define_types=True``) so that an
enqueue resolves the job's defaults from the code that will run it — with one rule:

**the stored definition wins.** A type nobody defined is defined from its handler's options
(a ``job_type_defined`` event, logged). A type already defined is left as it is: its
definition is a fact in the history that someone recorded on purpose (an operator's
``jobledger define mail --max-attempts 10``, or an earlier deployment), and a worker restart
must not silently undo it. Where the handler's options differ from it, the pool logs a
warning naming each differing field, and applies the handler's options only when told to
(``apply=True``: ``PoolConfig.apply_definitions``, ``jobledger worker --apply-definitions``),
as one ``job_type_updated`` event, logged, that keeps the fields the handler does not set
(priority, enabled, version). Every pool of a deployment may run this at start: nothing is
appended when nothing differs.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from ledger.api.ledger import Ledger
from ledger.core.events import JobDefinition
from ledger.runtime.handlers import HandlerSpec, Registry

log = logging.getLogger("jobledger.definitions")


def sync_definitions(ledger: Ledger, registry: Registry, *, apply: bool = False) -> None:
    """Define every registered type that is undefined; for a defined one whose handler's
    options differ, log the difference and keep the stored definition, unless ``apply``.

    Blocking: call it in a thread from a running loop.
    """
    for spec in registry.specs():
        current = ledger.definition(spec.job_type)
        options = _handler_options(spec)
        if current is None:
            defined = ledger.define(spec.job_type, **options)
            log.info("defined job type %s from its handler: %s", spec.job_type, _summary(defined))
            continue
        differing = {
            name: (getattr(current, name), value)
            for name, value in options.items()
            if getattr(current, name) != value
        }
        if not differing:
            continue
        if not apply:
            log.warning(
                "job type %s: the stored definition differs from its handler's (%s); keeping "
                "the stored one (start the worker with --apply-definitions to apply the "
                "handler's)",
                spec.job_type,
                ", ".join(
                    f"{name}: stored {old}, handler {new}" for name, (old, new) in differing.items()
                ),
            )
            continue
        wanted = msgspec.structs.replace(current, **options)
        fields = {name: getattr(wanted, name) for name in wanted.__struct_fields__}
        del fields["job_type"]
        ledger.define(spec.job_type, **fields)
        log.info(
            "updated job type %s from its handler: %s",
            spec.job_type,
            ", ".join(f"{name} {old} -> {new}" for name, (old, new) in differing.items()),
        )


def _handler_options(spec: HandlerSpec) -> dict[str, Any]:
    """The definition fields the handler sets, under the definition's names."""
    options: dict[str, Any] = {}
    if spec.max_attempts is not None:
        options["max_attempts"] = spec.max_attempts
    if spec.timeout_s is not None:
        options["default_timeout_s"] = float(spec.timeout_s)
    if spec.backoff is not None:
        options["backoff"] = spec.backoff
    return options


def _summary(definition: JobDefinition) -> str:
    backoff = definition.backoff
    return (
        f"max attempts {definition.max_attempts}, timeout {definition.default_timeout_s:g}s, "
        f"priority {definition.default_priority}, "
        f"backoff {backoff.base_s:g}s..{backoff.max_s:g}s ±{backoff.jitter:g}"
    )
