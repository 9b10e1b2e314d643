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

A typed job (``@registry.job``, :mod:`ledger.runtime.typed_jobs`) follows the same rule from
the producer's side: its first enqueue on a ledger defines its type from the declaration when
the type is undefined (:func:`define_from_handler`), and leaves a defined one as it is.
"""

from __future__ import annotations

import logging

import msgspec

from ledger.api.ledger import Ledger
from ledger.runtime.handler_spec import define_from_handler, handler_options
from ledger.runtime.handlers import Registry

log = logging.getLogger("jobledger.definitions")


def sync_definitions(ledger: Ledger, registry: Registry, *, apply: bool = False) -> None:
    """Define every registered type that is undefined; for a defined one whose handler's
    options differ, log the difference and keep the stored definition, unless ``apply``.

    Blocking: call it in a thread from a running loop.
    """
    for spec in registry.specs():
        current = ledger.definition(spec.job_type)
        options = handler_options(spec)
        if current is None:
            define_from_handler(ledger, spec)
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
