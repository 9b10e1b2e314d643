"""Worker "hosts" in network namespaces of the test's own, each wired to the root namespace by
a veth pair, so that one of them can be cut off the network (its veth's root end set down)
and then restored — a fault no process kill covers: the process runs on, its sockets go
silent, and whatever it sends may arrive late or never.

Address plan: one ``10.200.<octet>.0/24`` per run, the octet chosen free under a lock (no
address of it on any interface of the root namespace); host ``i`` is the ``/30``
``10.200.<octet>.<4i>``: ``.<4i+1>`` on the root end, ``.<4i+2>`` in the namespace. Traffic
goes only between the test's namespaces and those root ends (the test's PostgreSQL listens
there); no other address is ever configured or reached: the namespaces have no other route,
and in the root namespace the run's /24 ends in a blackhole route, so what the server sends
to a host that is cut off is dropped here rather than handed to the default route. Names
carry a per-run token (namespaces ``jlnet-<token>-<i>``, veths ``jl<token>r<i>`` /
``jl<token>n<i>``), and :meth:`HostNetwork.destroy` removes all of it (the blackhole route
too), whatever was created before a failure.

:func:`netns_unavailable` says why namespaces cannot be made here (a sandbox without
``CAP_SYS_ADMIN``/``CAP_NET_ADMIN``), or ``None``.
"""

from __future__ import annotations

import contextlib
import fcntl
import random
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from chaos_faults import JOBLEDGER, Fleet, WorkerProcess, WorkerSettings
from psycopg.conninfo import conninfo_to_dict

PREFIX = "10.200"
"""The private range the runs' /24s are taken from (no route of this machine leads there)."""
_LOCK = Path("/tmp/jobledger-netns.lock")


def _ip(*args: str, namespace: str | None = None) -> subprocess.CompletedProcess[str]:
    prefix = ["ip", "netns", "exec", namespace] if namespace else []
    return subprocess.run(
        [*prefix, "ip", *args], check=True, capture_output=True, text=True, timeout=30
    )


def netns_unavailable() -> str | None:
    """Why this environment cannot create a network namespace, or ``None`` if it can (a
    probe namespace is created and deleted at once)."""
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    probe = f"jlprobe-{uuid.uuid4().hex[:8]}"
    try:
        _ip("netns", "add", probe)
    except subprocess.CalledProcessError as exc:
        return f"`ip netns add` failed: {exc.stderr.strip() or exc}"
    with contextlib.suppress(subprocess.CalledProcessError):
        _ip("netns", "delete", probe)
    return None


@dataclass
class Host:
    """One worker host: its namespace, its veth pair and their addresses."""

    index: int
    namespace: str
    root_veth: str
    host_veth: str
    root_address: str
    """The root end's address: where this host reaches the test's PostgreSQL."""
    host_address: str
    cut: bool = False

    def exec_prefix(self) -> list[str]:
        """What runs a command inside this host's namespace."""
        return ["ip", "netns", "exec", self.namespace]


@dataclass
class HostNetwork:
    """``size`` hosts, created by :meth:`create` and removed by :meth:`destroy`."""

    size: int
    token: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    hosts: list[Host] = field(default_factory=list)
    octet: int | None = None
    _namespaces: list[str] = field(default_factory=list)
    _veths: list[str] = field(default_factory=list)
    _blackhole: bool = False

    @property
    def subnet(self) -> str:
        return f"{PREFIX}.{self.octet}.0/24"

    def root_addresses(self) -> list[str]:
        return [host.root_address for host in self.hosts]

    def create(self) -> None:
        """Pick a free /24 and build every host in it (under a lock, so that two runs at
        once never take the same one)."""
        with open(_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self.octet = _free_octet()
                # While a host's veth is down its /30 has no route here, and the root
                # namespace's default route would carry the server's packets to that host
                # out of this machine: the run's /24 ends in a blackhole instead (the
                # veths' /30s are more specific, so it only ever takes what they drop).
                _ip("route", "add", "blackhole", self.subnet)
                self._blackhole = True
                for index in range(self.size):
                    self.hosts.append(self._add_host(index))
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _add_host(self, index: int) -> Host:
        namespace = f"jlnet-{self.token}-{index}"
        root_veth, host_veth = f"jl{self.token}r{index}", f"jl{self.token}n{index}"
        base = f"{PREFIX}.{self.octet}"
        host = Host(
            index, namespace, root_veth, host_veth, f"{base}.{4 * index + 1}",
            f"{base}.{4 * index + 2}",
        )  # fmt: skip
        _ip("netns", "add", namespace)
        self._namespaces.append(namespace)
        _ip("link", "add", root_veth, "type", "veth", "peer", "name", host_veth)
        self._veths.append(root_veth)
        _ip("link", "set", host_veth, "netns", namespace)
        _ip("addr", "add", f"{host.root_address}/30", "dev", root_veth)
        _ip("link", "set", root_veth, "up")
        _ip("addr", "add", f"{host.host_address}/30", "dev", host_veth, namespace=namespace)
        _ip("link", "set", host_veth, "up", namespace=namespace)
        _ip("link", "set", "lo", "up", namespace=namespace)
        return host

    def cut(self, index: int) -> None:
        """Cut host ``index`` off: its veth's root end goes down, so whatever either side
        sends is lost (the host's own end stays up, as a NIC behind a dead switch port)."""
        host = self.hosts[index]
        _ip("link", "set", host.root_veth, "down")
        host.cut = True

    def restore(self, index: int) -> None:
        host = self.hosts[index]
        _ip("link", "set", host.root_veth, "up")
        host.cut = False

    def unacknowledged(self, index: int) -> int:
        """Bytes host ``index`` has sent to the root end and not yet seen acknowledged, over
        all its established TCP connections (``ss``'s Send-Q, inside its namespace)."""
        host = self.hosts[index]
        shown = subprocess.run(
            [*host.exec_prefix(), "ss", "-tnH", "state", "established", "dst", host.root_address],
            check=True, capture_output=True, text=True, timeout=30,
        ).stdout  # fmt: skip
        return sum(int(line.split()[1]) for line in shown.splitlines() if line.strip())

    def forget_connections(self, index: int) -> None:
        """Destroy, in the root namespace (the server's side), every socket connected to host
        ``index`` (``ss -K``), as a server that ended them long ago would have: while the host
        is cut off, the reset this sends never reaches it."""
        host = self.hosts[index]
        subprocess.run(
            ["ss", "-K", "-tn", "dst", host.host_address],
            check=True, capture_output=True, text=True, timeout=30,
        )  # fmt: skip

    def destroy(self) -> None:
        """Remove every veth and namespace this network created (deleting one end of a veth
        pair removes both; deleting a namespace removes what is inside it)."""
        for veth in self._veths:
            with contextlib.suppress(subprocess.CalledProcessError):
                _ip("link", "delete", veth)
        for namespace in self._namespaces:
            with contextlib.suppress(subprocess.CalledProcessError):
                _ip("netns", "delete", namespace)
        if self._blackhole:
            with contextlib.suppress(subprocess.CalledProcessError):
                _ip("route", "delete", "blackhole", self.subnet)
        self._veths.clear()
        self._namespaces.clear()
        self._blackhole = False


def _free_octet() -> int:
    """A third octet of ``10.200.x.0/24`` that no address or route of the root namespace
    uses."""
    shown = _ip("-4", "-o", "addr", "show").stdout + _ip("-4", "route", "show").stdout
    used = {
        int(word.split(".")[2])
        for word in shown.split()
        if word.startswith(f"{PREFIX}.") and word.count(".") >= 3
    }
    free = [octet for octet in range(1, 255) if octet not in used]
    if not free:
        raise RuntimeError(f"no free /24 left in {PREFIX}.0.0/16")
    return random.choice(free)


@contextlib.contextmanager
def host_network(size: int) -> Iterator[HostNetwork]:
    """A :class:`HostNetwork` of ``size`` hosts, destroyed on the way out (even on failure,
    and even if only part of it was built)."""
    network = HostNetwork(size)
    try:
        network.create()
        yield network
    finally:
        network.destroy()


def leftovers(network: HostNetwork) -> Sequence[str]:
    """Namespaces, links and routes of ``network`` still present after its destruction."""
    namespaces = _ip("netns", "list").stdout
    links = _ip("-o", "link", "show").stdout
    routes = _ip("-4", "route", "show").stdout
    return [
        line
        for line in (namespaces + links + routes).splitlines()
        if network.token in line or f"{PREFIX}.{network.octet}." in line
    ]


def host_url(url: str, host: Host) -> str:
    """``url`` (the test's own cluster, as the root namespace reaches it) as ``host`` reaches
    it: through its veth, at the root end's address."""
    params = conninfo_to_dict(url)
    return f"postgresql://{params['user']}@{host.root_address}:{params['port']}/{params['dbname']}"


class HostWorker(WorkerProcess):
    """``jobledger worker`` over the chaos app, run inside a host's namespace (``ip netns
    exec``, which execs in place: the pid is the worker's), with the host's own host id."""

    def __init__(
        self, url: str, name: str, settings: WorkerSettings, log_dir: Path, host: Host
    ) -> None:
        self.host = host
        super().__init__(host_url(url, host), name, settings, log_dir)

    def command(self, url: str, name: str, settings: WorkerSettings) -> list[str]:
        return [
            *self.host.exec_prefix(), JOBLEDGER, "--db", url, "worker",
            "--app", "chaos_app:registry", f"--host-id={self.host_id()}",
            f"--concurrency={settings.concurrency}", f"--lease={settings.lease_s}",
            f"--reaper-interval={settings.reaper_interval_s}",
            f"--reaper-retry-delay={settings.reaper_retry_delay_s}",
            f"--grace={settings.grace_s}", f"--poll={settings.poll_s}",
        ]  # fmt: skip

    def pool_name(self, name: str) -> str:
        return "default"  # the CLI's pool name

    def host_id(self) -> str:
        return f"net{self.host.index}"

    def ready_line(self) -> str:
        return f"{self.worker_id}: "  # the CLI's first line (its signal handlers follow)


class HostFleet(Fleet):
    """One :class:`HostWorker` per host of ``network``: slot ``i`` runs on host ``i``."""

    def __init__(
        self, network: HostNetwork, url: str, size: int, settings: WorkerSettings, log_dir: Path
    ) -> None:
        if size != len(network.hosts):
            raise ValueError(f"{size} workers for {len(network.hosts)} hosts")
        self.network = network
        super().__init__(url, size, settings, log_dir)

    def _spawn(self, name: str) -> WorkerProcess:
        index = int(name.removeprefix("chaos"))
        return HostWorker(self.url, name, self.settings, self.log_dir, self.network.hosts[index])
