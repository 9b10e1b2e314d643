"""The pytest plugin, as a user's suite meets it: small test files run through pytester (the
plugin loaded by its ``pytest11`` entry point, as ``pip install`` leaves it), their outcomes
checked, on both backends."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import psycopg
import pytest

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]

HEADER = """
import asyncio

import pytest

from ledger import JobContext, TransientError
from ledger.testing import assert_enqueued, refute_enqueued, run_until_idle

pytestmark = pytest.mark.parametrize("jobledger_backend", [{backend!r}])
"""


def _run(pytester: pytest.Pytester, backend: str | None, body: str, *args: str) -> pytest.RunResult:
    """Run ``body`` as a user's test module, every test on ``backend`` (``None``: as its
    tests parametrize ``jobledger_backend`` themselves)."""
    header = HEADER.format(backend=backend)
    if backend is None:
        header = header.rpartition("pytestmark")[0]
    pytester.makepyfile(test_user=header + body)
    return pytester.runpytest(
        "-p", "no:cacheprovider", "-o", "asyncio_default_fixture_loop_scope=function", *args
    )


def test_the_plugin_is_registered_under_pytest11() -> None:
    """The package's ``pytest11`` entry point names the plugin module, as ``jobledger``."""
    [plugin] = [ep for ep in entry_points(group="pytest11") if ep.name == "jobledger"]
    assert plugin.value == "ledger.testing.pytest_plugin"


def test_loading_the_plugin_loads_no_driver_and_no_runtime() -> None:
    """pytest imports the plugin in every run wherever jobledger is installed: in a fresh
    interpreter that import loads no database driver, store, API or runtime module, and
    ``ledger.testing``'s names still resolve on first use."""
    script = (
        "import sys, ledger.testing.pytest_plugin, ledger.testing as t\n"
        "heavy = ('psycopg', 'sqlite3', 'eventsourcing', 'ledger.store.store',"
        " 'ledger.api.ledger', 'ledger.runtime.pool')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "print(sorted(n for n in t.__all__ if getattr(t, n) is None))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == "[]\n[]\n", done.stderr


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_block_enqueued_exactly_these_jobs(pytester: pytest.Pytester, backend: str) -> None:
    """``assert_jobs`` passes for exactly the block's jobs and fails, naming the difference,
    for a missing or an extra one; jobs before the block and idempotent repeats don't count."""
    result = _run(
        pytester,
        backend,
        """
def test_exact(jobledger_ledger, jobledger_enqueued):
    jobledger_ledger.enqueue("email", {"to": "before@example.com"})
    with jobledger_enqueued() as enqueued:
        jobledger_ledger.enqueue("email", {"to": "ada@example.com"}, idempotency_key="k")
        jobledger_ledger.enqueue("email", {"to": "ada@example.com"}, idempotency_key="k")
        jobledger_ledger.enqueue("report", {"day": 1})
    jobledger_ledger.enqueue("email", {"to": "after@example.com"})
    enqueued.assert_jobs([("report", {"day": 1}), ("email", {"to": "ada@example.com"})])
    enqueued.assert_jobs(["email", "report"])
    assert enqueued.assert_enqueued(type="report").payload == {"day": 1}
    enqueued.refute_enqueued(type="email", payload={"to": "after@example.com"})
    assert len(enqueued.job_ids) == 2

def test_missing(jobledger_ledger, jobledger_enqueued):
    with jobledger_enqueued() as enqueued:
        jobledger_ledger.enqueue("email", {"to": "ada@example.com"})
    enqueued.assert_jobs([("email", {"to": "ada@example.com"}), ("report", {"day": 1})])

def test_extra(jobledger_ledger, jobledger_enqueued):
    with jobledger_enqueued() as enqueued:
        jobledger_ledger.enqueue("email", {"to": "ada@example.com"})
        jobledger_ledger.enqueue("email", {"to": "bob@example.com"})
    enqueued.assert_jobs([("email", {"to": "ada@example.com"})])
""",
    )
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*expected but not enqueued: [('report', {'day': 1})]*",
            "*enqueued but not expected: [('email', {'to': 'bob@example.com'})]*",
        ]
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_assert_and_refute_enqueued_read_the_whole_history(
    pytester: pytest.Pytester, backend: str
) -> None:
    """``assert_enqueued`` matches by type, payload subset and request fields; ``refute``
    fails on a match; both say what was enqueued."""
    result = _run(
        pytester,
        backend,
        """
def test_matches(jobledger_ledger):
    jobledger_ledger.enqueue("email", {"to": "ada@example.com", "lang": "en"}, queue="mail")
    job = assert_enqueued(jobledger_ledger, type="email", payload={"to": "ada@example.com"})
    assert job.request.queue == "mail"
    assert_enqueued(jobledger_ledger, queue="mail")
    refute_enqueued(jobledger_ledger, type="email", queue="other")
    refute_enqueued(jobledger_ledger, type="sms")
    with pytest.raises(TypeError, match="no field 'colour'"):
        assert_enqueued(jobledger_ledger, colour="red")
    with pytest.raises(TypeError, match="no field 'queu'"):
        refute_enqueued(jobledger_ledger, type="nothing", queu="mail")

def test_assert_fails(jobledger_ledger):
    jobledger_ledger.enqueue("email", {"to": "ada@example.com"})
    assert_enqueued(jobledger_ledger, type="email", payload={"to": "bob@example.com"})

def test_refute_fails(jobledger_ledger):
    jobledger_ledger.enqueue("email", {"to": "ada@example.com"})
    refute_enqueued(jobledger_ledger, type="email")
""",
    )
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*no job enqueued matches type='email', payload ⊇ {'to': 'bob@example.com'}*",
            "*1 job(s) enqueued match type='email'*",
        ]
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_inline_mode_runs_handlers_at_enqueue_as_a_worker_would(
    pytester: pytest.Pytester, backend: str
) -> None:
    """In inline mode enqueue returns after the handler ran (and a job it enqueued, too);
    the history is a worker's (leased by ``inline@…``, then succeeded), so verify and replay
    hold; a delayed job waits for the clock."""
    result = _run(
        pytester,
        backend,
        """
def test_inline(jobledger_inline, jobledger_registry, jobledger_clock):
    @jobledger_registry.handler("email")
    def send(ctx):
        if ctx.payload.get("follow_up"):
            inline.enqueue("email", {"to": "second"})
        return {"sent_to": ctx.payload["to"]}

    inline = jobledger_inline
    job_id = inline.enqueue("email", {"to": "first", "follow_up": True}).job_id
    assert inline.get(job_id).status == "succeeded"
    assert inline.get(job_id).output == {"sent_to": "first"}
    [follow_up] = [j.state for j in inline.jobs().jobs if j.state.job_id != job_id]
    assert (follow_up.status, follow_up.output) == ("succeeded", {"sent_to": "second"})
    events = [record.event for record in inline.history(job_id)]
    assert [event.name for event in events] == ["job_enqueued", "job_leased", "job_succeeded"]
    assert events[1].worker_id.startswith("inline@"), events[1]
    assert inline.worked.succeeded == 2

    later = inline.enqueue("email", {"to": "later"}, delay_s=60).job_id
    assert inline.get(later).status == "pending"
    jobledger_clock.advance(60)
    inline.work_now()
    assert inline.get(later).status == "succeeded"

    assert inline.projections().verify().clean
    assert [f for replay in inline.replay_check_all() for f in replay.findings] == []

async def test_inline_from_a_running_loop(jobledger_inline, jobledger_registry):
    @jobledger_registry.handler("ping")
    async def ping(ctx):
        return "pong"

    job_id = jobledger_inline.enqueue("ping").job_id
    assert jobledger_inline.get(job_id).output == "pong"
""",
        "-o",
        "asyncio_mode=auto",
    )
    result.assert_outcomes(passed=2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_until_idle_moves_the_fake_clock_over_backoffs_when_asked(
    pytester: pytest.Pytester, backend: str
) -> None:
    """Without ``advance_clock`` a retry waits for its backoff; with it the clock jumps to
    each retry's ``run_at`` until the job is done, and the stats add up over the passes."""
    result = _run(
        pytester,
        backend,
        """
def test_backoff(jobledger_ledger, jobledger_registry, jobledger_clock):
    failures = []

    @jobledger_registry.handler("flaky")
    async def flaky(ctx):
        if len(failures) < 2:
            failures.append(ctx.job.attempt)
            raise TransientError("down")
        return "up"

    job_id = jobledger_ledger.enqueue("flaky").job_id
    stats = asyncio.run(run_until_idle(jobledger_ledger, jobledger_registry))
    assert (stats.claimed, stats.retried, jobledger_ledger.get(job_id).status) == (1, 1, "pending")
    start = jobledger_clock.now()
    stats = asyncio.run(
        run_until_idle(jobledger_ledger, jobledger_registry, advance_clock=True)
    )
    assert (stats.claimed, stats.retried, stats.succeeded) == (2, 1, 1)
    assert jobledger_ledger.get(job_id).output == "up"
    assert jobledger_clock.now() > start
""",
    )
    result.assert_outcomes(passed=1)


@pytest.mark.postgres
def test_each_postgres_test_gets_a_fresh_copy_dropped_after(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """Two tests on PostgreSQL each see an empty ledger of their own; the server named by
    ``--jobledger-postgres`` holds neither database nor the template after the run."""
    names = tmp_path / "names.txt"
    result = _run(
        pytester,
        "postgres",
        f"""
@pytest.mark.parametrize("n", [1, 2])
def test_fresh(jobledger_ledger, jobledger_url, jobledger_pg_template, n):
    assert jobledger_ledger.counts().get("pending", 0) == 0
    jobledger_ledger.enqueue("t")
    with open({str(names)!r}, "a") as out:
        out.write(jobledger_url.rsplit("/", 1)[1] + "\\n" + jobledger_pg_template + "\\n")
""",
        "--jobledger-postgres",
        "postgresql://postgres@127.0.0.1:5432",
    )
    result.assert_outcomes(passed=2)
    made = set(names.read_text().split())
    assert len(made) == 3  # two copies and the one template
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres") as admin:
        left = admin.execute(
            "SELECT datname FROM pg_database WHERE datname = ANY(%s)", [list(made)]
        ).fetchall()
    assert left == []


def test_an_unreachable_postgres_server_is_an_error_not_a_skip(pytester: pytest.Pytester) -> None:
    """A PostgreSQL test whose server does not answer errors (it is never skipped); the
    SQLite ones in the same run still pass."""
    result = _run(
        pytester,
        None,
        """
def test_sqlite(jobledger_ledger):
    jobledger_ledger.enqueue("t")

@pytest.mark.parametrize("jobledger_backend", ["postgres"])
def test_postgres(jobledger_ledger):
    pass
""",
        "--jobledger-postgres",
        "postgresql://postgres@127.0.0.1:1",
    )
    result.assert_outcomes(passed=1, errors=1)
