"""The rebuild's fast paths read and write the same rows as the plain ones, on both backends:
paged (prefetched) reads, replays that note no dirty keys, shadows loaded in many chunks."""

from __future__ import annotations

from uuid import uuid4

from projection_helpers import populate

from ledger import Ledger
from ledger.store.reads import StoredRow, upto
from ledger.views.catalog import PROJECTIONS
from ledger.views.rows_from_history import Replay
from projections.rebuilder import Rebuilder


def test_pages_read_what_one_read_does_and_stop_at_the_end(db_url: str) -> None:
    """However small the pages, they hold every event after the start up to the end, in
    order, once."""
    populate(db_url)
    with Ledger.open(db_url) as ledger, ledger.store.read_snapshot() as tables:
        head = tables.head()
        every = tables.events_after(0, 10_000)
        assert every[-1].position == head
        for batch in (1, 4, 1_000):
            pages = list(tables.pages(0, head, batch))
            assert all(0 < len(page) <= batch for page in pages)
            assert [e for page in pages for e in page] == every
        middle = every[len(every) // 2].position
        assert [e for page in tables.pages(0, middle, 3) for e in page] == every[
            : len(every) // 2 + 1
        ]
        assert [e for page in tables.pages(middle, head, 3) for e in page] == every[
            len(every) // 2 + 1 :
        ]
        assert list(tables.pages(head, head, 3)) == []


def test_a_page_running_past_the_end_is_cut_there() -> None:
    """Positions can have gaps, so a page of ``end - start`` events can pass ``end``."""
    rows: list[StoredRow] = [(p, uuid4(), 1, "t.v1", b"") for p in (3, 4, 9, 12)]
    assert [row[0] for row in upto(rows, 9)] == [3, 4, 9]
    assert [row[0] for row in upto(rows, 2)] == []
    assert upto(rows, 12) is rows


def test_a_replay_notes_dirty_keys_only_when_asked(db_url: str) -> None:
    """Without dirty tracking the rows are the same and no key is noted; once switched on,
    the keys of later events are."""
    populate(db_url)
    with Ledger.open(db_url) as ledger, ledger.store.read_snapshot() as tables:
        events = tables.events_after(0, 10_000)
    tracked, untracked = Replay(), Replay(dirty=False)
    tracked.apply(events)
    untracked.apply(events[:-3])
    assert all(untracked.take_dirty(p.name) == set() for p in PROJECTIONS)
    untracked.track_dirty = True
    untracked.apply(events[-3:])
    assert untracked.take_dirty("queue") == {(e.originator_id,) for e in events[-3:]}
    for p in PROJECTIONS:
        assert list(untracked.rows(p.name)) == list(tracked.rows(p.name))
        assert untracked.count(p.name) == tracked.count(p.name) == len(tracked.keys(p.name))


def test_a_rebuild_in_tiny_pages_and_chunks_verifies_clean(db_url: str) -> None:
    """Many pages, many load chunks (COPY on PostgreSQL) and indexes built while the next
    shadow loads still give every view exactly its replayed rows."""
    populate(db_url)
    with Ledger.open(db_url) as ledger:
        before = ledger.projections().verify()
        report = Rebuilder(ledger.store, batch=5, chunk=3).rebuild()
        after = ledger.projections().verify()
    assert report.position == before.position
    assert after.clean
    # The audit (tracked, never run here) is verified up to its recorded position: none
    # before the rebuild, the head after it.
    assert report.rows["audit"] == after.views[-1].expected_rows > 0
    assert {v.name: v.live_rows for v in after.views} == report.rows
    assert {v.name: v.expected_rows for v in before.views[:-1]} == {
        name: count for name, count in report.rows.items() if name != "audit"
    }
