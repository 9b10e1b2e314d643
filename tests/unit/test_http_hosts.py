"""The ``Host`` check's parsing (ledger/http/hosts.py): names with and without ports, IPv6
literals, case."""

from __future__ import annotations

import pytest

from ledger.http.hosts import AllowedHosts, host_name


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost:8765", "localhost"),
        ("Jobs.Example", "jobs.example"),
        ("[::1]:8765", "::1"),
        ("[::1]", "::1"),
        ("::1", "::1"),
        ("127.0.0.1:80", "127.0.0.1"),
    ],
)
def test_host_name_drops_the_port_brackets_and_case(header: str, name: str) -> None:
    """A ``Host`` header's name is compared without port, IPv6 brackets or case."""
    assert host_name(header) == name


def test_allowed_are_localhost_ip_literals_and_the_names_given() -> None:
    """Allowed: localhost, any IP literal, the names given; not a name that only starts or
    ends like one, nor an empty header value."""
    allowed = AllowedHosts(["jobs.internal"])
    for header in ("localhost", "LOCALHOST:1", "10.1.2.3:8765", "[fe80::1]", "jobs.internal:9"):
        assert allowed.allows(header), header
    for header in ("jobs.internal.evil", "evil.jobs.internal", "localhost.evil", "", "a:b:c"):
        assert not allowed.allows(header), header
    assert allowed.allows(None)  # HTTP/1.0: no Host at all
