"""The PostgreSQL store read together with its archive (decision 31): ``jobledger
--include-archive`` reads through it."""

from __future__ import annotations

from uuid import UUID

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ledger.core.codec import Record
from ledger.store.postgres import partitions
from ledger.store.postgres.store import PostgresStore


class PostgresArchiveReadStore(PostgresStore):
    """A ledger read together with its archive: every connection's ``search_path`` starts
    with ``jl_all``, whose views named like the hot tables are hot ``UNION ALL`` archive
    (decision 31), so every read sees archived jobs as if they were hot. It only reads (a
    view is not writable), so nothing is caught up through it."""

    read_only = True

    def __init__(self, conninfo: str, pool_size: int = 2) -> None:
        params = conninfo_to_dict(conninfo)
        path = f"-c search_path={partitions.ALL_SCHEMA},public"
        params["options"] = f"{params.get('options') or ''} {path}".strip()
        super().__init__(make_conninfo(**params), pool_size=pool_size)  # type: ignore[arg-type]
        self._hot_conninfo = conninfo

    def check_initialised(self) -> None:
        """Checked on the hot tables, through a store of the plain search path (the schema
        checks read ``current_schema()``, here ``jl_all``)."""
        hot = PostgresStore(self._hot_conninfo, pool_size=1, max_overflow=0)
        try:
            hot.check_initialised()
        finally:
            hot.close()

    def history(self, originator_id: UUID) -> list[Record]:
        """Through the ledger's own query: the recorder's names the hot table by schema."""
        with self.read_snapshot() as tables:
            return tables.histories([originator_id])[originator_id]

    def has_archive(self) -> bool:
        with self._cursor() as cursor:
            return partitions.layout(cursor) == "partitioned" and bool(
                partitions.archived_months(cursor)
            )
