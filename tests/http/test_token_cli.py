"""``jobledger token``: create prints the secret once, list never shows one, revoke is an
event; ``serve --token-file`` bootstraps an admin token."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from jobledger_cli.main import cli
from ledger.api.ledger import Ledger


def test_create_list_revoke(db_url: str) -> None:
    """The printed secret authenticates; list holds no secret or hash; a revoked token does
    not authenticate, and its stream holds both events."""
    runner = CliRunner()
    made = runner.invoke(
        cli, ["--db", db_url, "token", "create", "--org", "acme", "--role", "read"]
    )
    assert made.exit_code == 0, made.output
    secret = made.stdout.strip()
    listed = runner.invoke(cli, ["--db", db_url, "token", "list", "--json"])
    (token,) = json.loads(listed.stdout)
    assert token["org"] == "acme" and token["role"] == "read" and token["active"]
    assert len(secret) >= 32 and secret not in listed.stdout
    assert "hash" not in listed.stdout
    with Ledger.open(db_url) as ledger:
        found = ledger.tokens.authenticate(secret)
        assert found is not None and str(found.token_id) == token["token_id"]
    revoked = runner.invoke(cli, ["--db", db_url, "token", "revoke", token["token_id"]])
    assert revoked.exit_code == 0, revoked.output
    with Ledger.open(db_url) as ledger:
        assert ledger.tokens.authenticate(secret) is None
        stream = ledger.store.history(found.token_id)
        assert [record.event.name for record in stream] == ["token_created", "token_revoked"]
        assert ledger.projections().verify().clean


def test_a_read_token_needs_an_org(db_url: str) -> None:
    """Only an admin token may span every org."""
    result = CliRunner().invoke(cli, ["--db", db_url, "token", "create", "--role", "operate"])
    assert result.exit_code == 1
    assert "needs an --org" in result.output


def test_token_file_bootstraps_an_admin_token(sqlite_url: str, tmp_path: Path) -> None:
    """A missing --token-file gets an admin token's secret (0600); a file with a bad secret
    is refused."""
    path = tmp_path / "admin.token"
    bad = tmp_path / "bad.token"
    bad.write_text("jlt_nothing_here\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "jobledger_cli.main",
            "--db",
            sqlite_url,
            "serve",
            "--token-file",
            str(bad),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "holds no active admin token" in done.stderr
    with Ledger.open(sqlite_url) as ledger:
        from jobledger_cli.serve import _bootstrap

        _bootstrap(ledger, path)
        assert path.stat().st_mode & 0o777 == 0o600
        token = ledger.tokens.authenticate(path.read_text().strip())
        assert token is not None and token.role.value == "admin" and token.org is None
        _bootstrap(ledger, path)  # an existing valid file is accepted as it is
        assert len(ledger.tokens.all()) == 1
