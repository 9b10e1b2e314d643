"""mypy --strict types a typed job's enqueue by its handler: a wrong payload, a wrong keyword
parameter or a wrong use of the output is flagged; the right ones pass."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent(
    """
    import msgspec

    from ledger import Enqueued, JobContext, Ledger, Registry, SyncJobContext


    class Charge(msgspec.Struct):
        amount: int


    class Refund(msgspec.Struct):
        amount: int


    class Receipt(msgspec.Struct):
        charged: int


    registry = Registry()


    @registry.job("card.charge", max_attempts=5)
    async def charge(ctx: JobContext, payload: Charge) -> Receipt:
        return Receipt(charged=payload.amount)


    @registry.job("mail.send")
    def send(ctx: SyncJobContext, *, to: str, retries: int = 0) -> None:
        ctx.heartbeat()


    def produce(ledger: Ledger) -> None:
        ok: Enqueued[Receipt] = charge.enqueue(ledger, Charge(amount=1), idempotency_key="k")
        charged: int = ok.output().charged
        charge.enqueue_many(ledger, [Charge(amount=2)])
        send.enqueue(ledger, to="ada")
        send.with_options(org="acme").enqueue(ledger, to="bo", retries=1)
        charge.enqueue(ledger, Refund(amount=1))  # wrong: wrong struct
        charge.enqueue(ledger, {"amount": 1})  # wrong: a dict is not a Charge
        charge.enqueue(ledger, Charge(amount=1), idempotency=1)  # wrong: no such option
        send.enqueue(ledger, to=3)  # wrong: wrong parameter type
        send.enqueue(ledger, too="ada")  # wrong: no such parameter
        text: str = ok.output()  # wrong: the output is a Receipt
    """
)


@pytest.mark.timeout(300)
def test_mypy_flags_exactly_the_wrong_enqueues(tmp_path: Path) -> None:
    """Each wrong line is an error on that line; the right ones are not."""
    program = tmp_path / "typed_program.py"
    program.write_text(PROGRAM)
    stdout, stderr, _ = api.run(
        [
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            "--config-file",
            str(ROOT / "pyproject.toml"),
            str(program),
        ]
    )
    lines = sorted({int(line.split(":")[1]) for line in stdout.splitlines() if ": error:" in line})
    wrong = [n for n, line in enumerate(PROGRAM.splitlines(), 1) if "# wrong:" in line]
    assert len(wrong) == 6 and lines == wrong, stdout + stderr
