"""Job-type definition commands: define (or update) a type, enable or disable it.

A definition is a stream of its own (``JobTypeDefined`` then ``JobTypeUpdated`` events);
re-defining a type identically appends nothing.
"""

from __future__ import annotations

import msgspec

from ledger.clock import Clock
from ledger.core.errors import DefinitionNotFoundError
from ledger.core.events import Event, JobTypeDefined, JobTypeUpdated
from ledger.core.limits import check_actor
from ledger.core.values import JobDefinition
from ledger.store.store import Store
from ledger.store.unit_of_work import UnitOfWork
from ledger.views.kinds import DEFINITIONS


def put_definition(store: Store, clock: Clock, definition: JobDefinition) -> JobDefinition:
    """Record a (validated) definition unless it is already the current one."""
    with store.unit_of_work() as uow:
        _record(uow, clock, definition)
    return definition


def set_enabled(
    store: Store, clock: Clock, job_type: str, enabled: bool, *, actor: str | None = None
) -> JobDefinition:
    """Change only whether a defined job type is enabled; an undefined one is an error.
    ``actor`` is recorded in the ``job_type_updated`` (nothing is appended if unchanged)."""
    if actor is not None:
        check_actor(actor)
    with store.unit_of_work() as uow:
        uow.serialise_appends()  # read the definition we change only once no one else can
        current = uow.state(DEFINITIONS, job_type)
        if current is None:
            raise DefinitionNotFoundError(f"job type {job_type!r} is not defined")
        changed = msgspec.structs.replace(current.definition, enabled=enabled)
        _record(uow, clock, changed, actor=actor)
        return changed


def _record(
    uow: UnitOfWork, clock: Clock, definition: JobDefinition, *, actor: str | None = None
) -> None:
    # Serialise first: two processes defining one type at once would otherwise both
    # decide "defined" and collide on the stream's first version.
    uow.serialise_appends()
    current = uow.state(DEFINITIONS, definition.job_type)
    now = clock.now()
    event: Event
    if current is None:
        event = JobTypeDefined(at=now, definition=definition)
    elif current.definition == definition:
        return
    else:
        event = JobTypeUpdated(at=now, definition=definition, actor=actor)
    uow.append([DEFINITIONS.change(definition.job_type, [event])])
