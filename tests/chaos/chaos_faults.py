"""What the chaos suite does to the system: worker processes it kills, stops and restarts,
connections it terminates, and a PostgreSQL cluster of its own that it restarts.

Every fault is recorded in a :class:`FaultLog` with the wall time it was injected (the
system clock the workers stamp their events with), so the checks can measure recovery from
the history. Nothing here touches the shared PostgreSQL server beyond terminating the
connections to the test's own database.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO

import psycopg
from chaos_app import READY

from ledger.clock import SystemClock

CHAOS_DIR = Path(__file__).resolve().parent
REPO_ROOT = CHAOS_DIR.parent.parent
LAUNCHER = CHAOS_DIR / "chaos_launcher.py"
JOBLEDGER = str(Path(sys.executable).with_name("jobledger"))
"""The installed console script: the real CLI, as an operator runs it."""
_clock = SystemClock()


def worker_env(log_dir: Path) -> dict[str, str]:
    """The environment of a worker process: the chaos app importable, its side log set."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(CHAOS_DIR), str(REPO_ROOT)])
    env["JOBLEDGER_CHAOS_LOG"] = str(log_dir)
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class Fault:
    kind: str
    at: datetime
    worker_id: str | None = None
    detail: str = ""
    landed_by: datetime | None = None
    """For a signal that ends a process: when the process was seen gone. ``at`` is read just
    before the signal is sent, and the victim may run on (finish a handler, say) until the
    kernel delivers it; between the two it is neither alive for sure nor dead for sure."""


@dataclass
class FaultLog:
    faults: list[Fault] = field(default_factory=list)

    def record(self, kind: str, worker_id: str | None = None, detail: str = "") -> Fault:
        fault = Fault(kind, _clock.now(), worker_id, detail)
        self.faults.append(fault)
        return fault

    @staticmethod
    def landed(fault: Fault) -> None:
        """Record that ``fault``'s signal has taken effect (its process is gone) by now."""
        fault.landed_by = _clock.now()

    def by_kind(self) -> dict[str, int]:
        return dict(Counter(f.kind for f in self.faults))

    def of_kind(self, kind: str) -> list[Fault]:
        return [f for f in self.faults if f.kind == kind]


@dataclass(frozen=True)
class WorkerSettings:
    """The knobs of one chaos worker process (seconds)."""

    concurrency: int = 8
    lease_s: float = 3.0
    reaper_interval_s: float = 0.5
    reaper_retry_delay_s: float = 0.2
    grace_s: float = 10.0
    poll_s: float = 0.2


class WorkerProcess:
    """One real worker process (the launcher), its stderr kept in a file for evidence."""

    def __init__(self, url: str, name: str, settings: WorkerSettings, log_dir: Path) -> None:
        self.name = name
        self.stderr_path = log_dir / f"{name}-{len(list(log_dir.glob(name + '-*.err')))}.err"
        self._stderr: IO[bytes] = open(self.stderr_path, "wb")  # noqa: SIM115 - closed in wait
        self.process = subprocess.Popen(
            self.command(url, name, settings),
            cwd=REPO_ROOT,
            env=worker_env(log_dir),
            stderr=self._stderr,
        )
        self.worker_id = f"{self.pool_name(name)}@{self.host_id()}:{self.process.pid}"
        self.signalled = False
        """Set when the suite itself ended this process (an exit is then expected)."""

    def command(self, url: str, name: str, settings: WorkerSettings) -> list[str]:
        """The launcher's command line (a subclass may run another, e.g. in a namespace)."""
        return [
            sys.executable,
            str(LAUNCHER),
            url,
            f"--name={name}",
            f"--concurrency={settings.concurrency}",
            f"--lease={settings.lease_s}",
            f"--reaper-interval={settings.reaper_interval_s}",
            f"--reaper-retry-delay={settings.reaper_retry_delay_s}",
            f"--grace={settings.grace_s}",
            f"--poll={settings.poll_s}",
        ]

    def pool_name(self, name: str) -> str:
        return name

    def host_id(self) -> str:
        return socket.gethostname()

    def ready_line(self) -> str:
        """What the process prints on stderr once it serves."""
        return f"{READY} {self.worker_id}"

    def wait_ready(self, timeout_s: float = 30.0) -> bool:
        """Wait until the process serves (its ready line), or has exited."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.alive():
            if self.ready_line() in self.stderr_path.read_text(errors="replace"):
                return True
            time.sleep(0.05)
        return False

    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, signum: int) -> None:
        if signum in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
            self.signalled = True
        self.process.send_signal(signum)

    def wait(self, timeout_s: float) -> int:
        try:
            return self.process.wait(timeout_s)
        finally:
            self._stderr.close()

    def stderr_tail(self, lines: int = 30) -> str:
        text = self.stderr_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


class Fleet:
    """``size`` worker slots, each a named pool; a slot restarted keeps its pool name (so the
    new process boot-reaps what its killed predecessor held, as on a real host)."""

    def __init__(self, url: str, size: int, settings: WorkerSettings, log_dir: Path) -> None:
        self.url = url
        self.settings = settings
        self.log_dir = log_dir
        self.slots = [self._spawn(f"chaos{i}") for i in range(size)]
        self.retired: list[WorkerProcess] = []

    def _spawn(self, name: str) -> WorkerProcess:
        return WorkerProcess(self.url, name, self.settings, self.log_dir)

    def restart(self, index: int) -> WorkerProcess:
        old = self.slots[index]
        if old.alive():
            raise RuntimeError(f"{old.worker_id} is still running")
        old.wait(5)
        self.retired.append(old)
        self.slots[index] = self._spawn(old.name)
        return self.slots[index]

    def crashed(self) -> list[WorkerProcess]:
        """Processes that exited although the suite never signalled them to."""
        return [w for w in [*self.retired, *self.slots] if not w.alive() and not w.signalled]

    def stop_all(self, timeout_s: float) -> dict[str, int | None]:
        """SIGTERM every live worker (SIGCONT first, in case it is stopped) and wait for it."""
        codes: dict[str, int | None] = {}
        for worker in self.slots:
            worker.wait_ready()
            if worker.alive():
                worker.process.send_signal(signal.SIGCONT)
                worker.send(signal.SIGTERM)
        for worker in self.slots:
            try:
                codes[worker.worker_id] = worker.wait(timeout_s)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.wait(5)
                codes[worker.worker_id] = None
        for worker in self.retired:
            codes[worker.worker_id] = worker.process.returncode
        return codes

    def log_lines(self, worker_id: str, needle: str) -> str:
        """The lines of ``worker_id``'s stderr that mention ``needle`` (evidence)."""
        for worker in [*self.retired, *self.slots]:
            if worker.worker_id == worker_id:
                text = worker.stderr_path.read_text(errors="replace").splitlines()
                return "\n".join(f"    {line}" for line in text if needle in line) or "    -"
        return "    (no such worker)"

    def kill_everything(self) -> None:
        """Last-resort cleanup: no process of the suite outlives its test."""
        for worker in [*self.slots, *self.retired]:
            if worker.alive():
                worker.process.kill()
                worker.wait(5)


def terminate_backends(admin_url: str, dbname: str) -> int:
    """``pg_terminate_backend`` every connection to ``dbname`` (the test's own database)."""
    with psycopg.connect(admin_url, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (dbname,),
        ).fetchall()
    return len(rows)


def _pg_bin() -> Path:
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    if not versions:
        raise RuntimeError("no PostgreSQL binaries under /usr/lib/postgresql/*/bin")
    return versions[-1].parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ThrowawayPostgres:
    """A PostgreSQL cluster of the test's own (initdb in a temp dir, its own port), so the
    suite can restart a server without touching the shared one. As root, the server runs as
    the ``postgres`` OS user (initdb refuses root).

    ``listen``: the addresses it listens on besides 127.0.0.1 (which must exist before it
    starts: the network namespaces' veth ends); ``trust``: the networks (CIDR) whose clients
    it admits without a password besides the loopback's (initdb's own rules)."""

    def __init__(self, listen: Sequence[str] = (), trust: Sequence[str] = ()) -> None:
        self.bin = _pg_bin()
        self.listen = ",".join(["127.0.0.1", *listen])
        self.root = Path(tempfile.mkdtemp(prefix="jl-chaos-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._as_user = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        if trust:
            with open(self.data / "pg_hba.conf", "a") as hba:
                hba.writelines(f"host all all {network} trust\n" for network in trust)
        self.start()

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(
            [*self._as_user, str(self.bin / tool), *args],
            check=True,
            capture_output=True,
            timeout=60,
        )

    @property
    def server_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses={self.listen} -c fsync=off"
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w",
            "start",
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def create_database(self, name: str) -> str:
        with psycopg.connect(f"{self.server_url}/postgres", autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        return f"{self.server_url}/{name}"

    def destroy(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):  # already down
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
