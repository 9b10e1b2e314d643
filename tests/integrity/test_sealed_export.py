"""Sealed exports: a file whose trailer binds its digest to the source's chain head under an
ed25519 signature (format version 3), and imports that refuse a file whose seal does not hold.

The forger here edits an event line and recomputes the trailer's digest (anyone can: it is
a plain SHA-256); only the seal, which needs the key, tells the file apart.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from jobledger_cli.main import cli
from ledger import FakeClock, Ledger
from ledger.core.exchange import ImportSignatureError
from ledger.core.exchange_trailer import FileDigest
from ledger.core.integrity_checkpoints import short_head
from ledger.integrity.keys import write_key_pair


def invoke(url: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--db", url, *args])


@pytest.fixture
def source(db_url: str, clock: FakeClock) -> str:
    with Ledger.open(db_url, clock=clock) as ledger:
        ledger.define("invoice.send")
        for n in range(3):
            ledger.enqueue("invoice.send", {"invoice": n, "amount": "12.50"})
    return db_url


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    return write_key_pair(tmp_path / "signing.pem")


def sealed_file(url: str, private: Path, tmp_path: Path) -> Path:
    out = tmp_path / "sealed.jsonl"
    result = invoke(url, "export", "--signing-key", str(private), "-o", str(out))
    assert result.exit_code == 0, result.output
    return out


def forged(path: Path) -> Path:
    """The file with one amount changed and its trailer's digest recomputed to match."""
    lines = path.read_bytes().splitlines(keepends=True)
    body = [line.replace(b'"12.50"', b'"92.50"') for line in lines[:-1]]
    assert body != lines[:-1]
    digest = FileDigest()
    for line in body:
        digest.update(line)
    trailer = json.loads(lines[-1])
    trailer["trailer"]["digest"] = digest.value()
    out = path.with_name("forged.jsonl")
    out.write_bytes(b"".join(body) + json.dumps(trailer, separators=(",", ":")).encode() + b"\n")
    return out


def test_a_sealed_export_imports_under_its_key_and_names_the_chain_head(
    source: str, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    private, public = keys
    path = sealed_file(source, private, tmp_path)
    lines = path.read_bytes().splitlines()
    assert json.loads(lines[0]) == {"format": "jobledger-history", "version": 3}
    seal = json.loads(lines[-1])["trailer"]["chain"]
    with Ledger.open(source) as ledger:
        head = ledger.integrity.head()
    assert (seal["events"], seal["head"]) == (head.events, head.head)
    target = f"sqlite:///{tmp_path / 'target.db'}"
    result = invoke(target, "import", str(path), "--verify-signature", str(public))
    assert result.exit_code == 0, result.output
    assert f"chain head {short_head(head.events, bytes.fromhex(head.head))}" in result.stderr
    assert "imported 3 jobs" in result.stderr
    # A plain export is still version 2, without a seal.
    plain = invoke(source, "export").stdout.splitlines()
    assert json.loads(plain[0])["version"] == 2 and "chain" not in json.loads(plain[-1])["trailer"]


def test_another_key_or_no_seal_is_refused_before_the_target_is_made(
    source: str, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    private, _ = keys
    path = sealed_file(source, private, tmp_path)
    _, other = write_key_pair(tmp_path / "other.pem")
    target = tmp_path / "target.db"
    refused = invoke(f"sqlite:///{target}", "import", str(path), "--verify-signature", str(other))
    assert refused.exit_code == 1
    assert "import.signature" in refused.stderr and "not by the key given" in refused.stderr
    unsealed = tmp_path / "plain.jsonl"
    unsealed.write_bytes(invoke(source, "export").stdout_bytes)
    again = invoke(f"sqlite:///{target}", "import", str(unsealed), "--verify-signature", str(other))
    assert again.exit_code == 1 and "not sealed" in again.stderr
    assert not target.exists()


def test_an_edited_file_with_its_digest_recomputed_fails_its_seal(
    source: str, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    """The digest matches the forged lines, so only the seal can tell: it is checked under
    the key the file carries even without --verify-signature."""
    private, public = keys
    bad = forged(sealed_file(source, private, tmp_path))
    target = f"sqlite:///{tmp_path / 'target.db'}"
    for args in ((), ("--verify-signature", str(public))):
        result = invoke(target, "import", str(bad), *args)
        assert result.exit_code == 1, result.output
        assert "does not match the file's digest" in result.stderr


def test_the_python_api_seals_and_verifies_with_key_objects(source: str, tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    chunks: list[bytes] = []
    with Ledger.open(source) as ledger:
        ledger.integrity.catch_up()
        ledger.export_history(chunks.append, signing_key=key)
    path = tmp_path / "api.jsonl"
    path.write_bytes(b"".join(chunks))

    def lines() -> list[bytes]:
        return path.read_bytes().splitlines(keepends=True)

    with Ledger.open(f"sqlite:///{tmp_path / 'a.db'}", create=True) as target:
        report = target.import_history(lines, verify_key=key.public_key())
    assert report.jobs == 3
    with (
        Ledger.open(f"sqlite:///{tmp_path / 'b.db'}", create=True) as target,
        pytest.raises(ImportSignatureError),
    ):
        target.import_history(lines, verify_key=Ed25519PrivateKey.generate().public_key())
