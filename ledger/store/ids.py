"""Ids and list parameters as each backend stores and binds them: one adapter per backend.

PostgreSQL stores ids in ``uuid`` columns and binds a list as an array (``= ANY(%s::uuid[])``);
SQLite stores ids as 32-hex text and binds a list as one JSON text (``IN (SELECT value FROM
json_each(:ids))``). Every query parameter that holds an id or a list goes through the
store's :class:`IdAdapter`, so no module outside a backend spells either form. Pure: no driver.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any
from uuid import UUID


class IdAdapter(ABC):
    """Converts ids (``UUID``) and lists to and from the backend's stored forms."""

    backend: str

    @abstractmethod
    def key(self, value: UUID) -> Any:
        """One id as the backend stores it (and binds it for ``=``)."""

    @abstractmethod
    def keys(self, values: Iterable[UUID]) -> Any:
        """Ids as one list parameter of the backend's queries."""

    @abstractmethod
    def values(self, values: Iterable[Any]) -> Any:
        """Other values (job types, event names) as one list parameter."""

    @abstractmethod
    def uuid(self, stored: Any) -> UUID:
        """An id read back from a column (the inverse of :meth:`key`)."""

    def stored(self, value: Any) -> Any:
        """``value`` as the backend stores it: ids converted, anything else as it is."""
        return self.key(value) if isinstance(value, UUID) else value

    def stored_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Named parameters with every id in its stored form."""
        return {name: self.stored(value) for name, value in params.items()}


class PostgresIds(IdAdapter):
    """``uuid`` columns and arrays: psycopg adapts ``UUID`` and ``list`` itself."""

    backend = "postgres"

    def key(self, value: UUID) -> UUID:
        return value

    def keys(self, values: Iterable[UUID]) -> list[UUID]:
        return list(values)

    def values(self, values: Iterable[Any]) -> list[Any]:
        return list(values)

    def uuid(self, stored: Any) -> UUID:
        return stored if isinstance(stored, UUID) else UUID(str(stored))

    def stored_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return dict(params)  # nothing to convert


class SQLiteIds(IdAdapter):
    """32-hex text ids and JSON-text lists (read with ``json_each``)."""

    backend = "sqlite"

    def key(self, value: UUID) -> str:
        return value.hex

    def keys(self, values: Iterable[UUID]) -> str:
        return json.dumps([value.hex for value in values])

    def values(self, values: Iterable[Any]) -> str:
        return json.dumps(list(values))

    def uuid(self, stored: Any) -> UUID:
        return stored if isinstance(stored, UUID) else UUID(hex=str(stored))


ID_ADAPTERS: dict[str, IdAdapter] = {"postgres": PostgresIds(), "sqlite": SQLiteIds()}
"""The adapter of each backend, by name (adapters hold no state: one each is enough)."""


def id_adapter(backend: str) -> IdAdapter:
    """The adapter of ``backend`` ("postgres" or "sqlite")."""
    return ID_ADAPTERS[backend]
