"""The chain survives retention: events moved to the archive keep their place in it.

Without ``--include-archive`` the archived jobs' events are counted as archived (the
retention stream's ``jobs_archived`` names their jobs), not as deleted; with it they are read
from the archive and checked like hot ones, so an edit made there is named too.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ledger import Ledger
from tests.retention.retention_helpers import invoke, make_jobs


def _ok(url: str, *args: str) -> str:
    result = invoke(url, *args)
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    return result.stdout


def archive_everything_finished(url: str) -> int:
    """Chain the history, then move the finished jobs past a 30-day rule (on PostgreSQL a
    month partition: January 2020's); how many events the chain covered before the move."""
    if url.startswith("postgresql"):
        sys.path.insert(0, str(Path(__file__).parents[1] / "retention"))
        from month_jobs import make_month_jobs  # its helpers import by bare name

        make_month_jobs(url)
        moved = 3
    else:
        make_jobs(url)
        moved = 5
    with Ledger.open(url) as ledger:
        ledger.integrity.catch_up(checkpoint_every=None)
        chained = ledger.integrity.head().events
    _ok(url, "retention", "set", "--type", "t", "--after", "30d")
    run = json.loads(_ok(url, "retention", "run", "--json"))
    assert run["moved"] == moved
    return chained


def test_archived_events_are_counted_then_checked_with_the_archive(db_url: str) -> None:
    chained = archive_everything_finished(db_url)
    hot = json.loads(_ok(db_url, "integrity", "verify", "--json"))
    assert hot["ok"], hot["findings"]
    assert hot["archived"] > 0
    assert hot["checked"] + hot["archived"] == hot["events"] == chained
    both = json.loads(_ok(db_url, "integrity", "verify", "--include-archive", "--json"))
    assert both["ok"], both["findings"]
    assert (both["archived"], both["checked"]) == (0, chained)


def test_an_event_deleted_from_a_live_job_is_still_missing_after_retention(db_url: str) -> None:
    """Retention excuses the archived jobs' events only: a live job's deleted event is named."""
    from tests.integrity import tamper

    archive_everything_finished(db_url)
    column = tamper.id_column(db_url)
    [(position,)] = tamper.run_sql(
        db_url,
        [
            f"SELECT e.{column} FROM jl_events AS e JOIN jl_queue AS q "
            "ON q.job_id = e.originator_id WHERE q.status = 'pending' "
            f"ORDER BY e.{column} LIMIT 1"
        ],
    )
    tamper.delete_event(db_url, int(position))
    result = invoke(db_url, "integrity", "verify", "--json")
    assert result.exit_code == 1
    found = json.loads(result.stdout)["first_divergence"]
    assert (found["kind"], found["position"]) == ("missing", int(position))
