"""``jobledger integrity``: the history's hash chain (docs/integrity.md).

``head`` prints where the chain is and the short digest to publish; ``verify`` recomputes it
over the stored events and checks the witness, every checkpoint and signature, and a
published head, exiting 1 on any divergence; ``follow`` extends it until stopped (a pool's
chain witness does the same on an interval); ``checkpoint`` records its head now; ``keygen``
writes a signing key pair."""

from __future__ import annotations

from typing import Any

import click

from .database import Settings, open_ledger
from .projections import follow_until_signalled, poll_option
from .read_target import open_reader
from .render import compact_json, echo_json, json_option
from ledger.api.shaping import plain
from ledger.core.integrity_checkpoints import IntegrityCheckpoint, key_id, short_head
from ledger.integrity.integrity_reader import ChainStatus
from ledger.integrity.keys import write_key_pair
from projections.chain import CHECKPOINT_EVERY
from projections.chain_verify import IntegrityFinding, IntegrityReport
from projections.follower import Follower
from projections.tracked import CatchUp

DIVERGED_EXIT = 1

_SIGNING_KEY = click.option(
    "--signing-key",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    metavar="FILE",
    help="Sign checkpoints with this ed25519 private key (PEM; `integrity keygen`).",
)


@click.group()
def integrity() -> None:
    """The history's hash chain: its head, checkpoints and verification."""


def _status_text(status: ChainStatus) -> str:
    if not status.started:
        return f"the chain has not started ({status.unwitnessed} events): run `jobledger migrate`"
    lines = ["the chain has not hashed any event yet"] if status.events == 0 else []
    lines += [
        f"head      {status.short_head}",
        f"chain     {status.events} events up to position {status.position}: {status.head}",
    ]
    if status.start_position:
        lines.append(
            f"starts    after position {status.start_position} (events before it came before "
            "the chain: `migrate` started it there)"
        )
    lines.append(f"behind    {status.unwitnessed} events not hashed yet")
    if status.checkpoints:
        signer = (
            f"signed by key {status.last_checkpoint_key}"
            if status.last_checkpoint_key
            else "unsigned"
        )
        lines.append(
            f"checkpoints {status.checkpoints}; the last at {status.last_checkpoint_events} "
            f"events, {signer}"
        )
    else:
        lines.append("checkpoints none yet")
    return "\n".join(lines)


@integrity.command()
@json_option
@click.pass_obj
def head(settings: Settings, as_json: bool) -> None:
    """Where the chain is, and the short digest (EVENTS:HEX) to publish elsewhere."""
    with open_reader(settings) as source:
        status = source.reader.integrity.head()
    if as_json:
        echo_json(source.tagged(plain(status)))
    else:
        click.echo(_status_text(status))


def _finding_text(finding: IntegrityFinding) -> str:
    where = []
    if finding.position is not None:
        where.append(f"position {finding.position}")
    if finding.job_id is not None:
        where.append(f"stream {finding.job_id}")
    if finding.version is not None:
        where.append(f"version {finding.version}")
    if finding.event is not None:
        where.append(f"event {finding.event}")
    at = f" at {', '.join(where)}" if where else ""
    return f"{finding.kind}{at}: {finding.detail}"


def _report_text(report: IntegrityReport) -> str:
    lines = []
    if report.started:
        lines.append(
            f"checked {report.checked} of {report.events} chained events"
            + (f" ({report.archived} archived, not read)" if report.archived else "")
            + f"; {report.checkpoints} checkpoint(s), {report.signed} signed"
        )
        lines.append(f"head {report.short_head}")
        if report.unwitnessed:
            lines.append(f"{report.unwitnessed} event(s) after the head are not hashed yet")
    if report.ok:
        lines.append("ok: the history matches its chain")
    else:
        lines.append(f"DIVERGED: {len(report.findings)} finding(s):")
        lines += [f"  {_finding_text(f)}" for f in report.findings]
    return "\n".join(lines)


@integrity.command()
@click.option(
    "--from",
    "from_position",
    type=click.IntRange(min=0),
    default=None,
    metavar="POSITION",
    help="Start at the witness block holding this position (trusting the chain before it).",
)
@click.option(
    "--public-key",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    metavar="FILE",
    help="Require every checkpoint to be signed by this ed25519 key (PEM).",
)
@click.option(
    "--expect",
    metavar="EVENTS:HEX",
    default=None,
    help="A head published earlier (`integrity head`): the chain must still give it.",
)
@click.option(
    "--include-archive",
    is_flag=True,
    help="Read the events retention moved to the archive too, and check them.",
)
@json_option
@click.pass_obj
def verify(
    settings: Settings,
    *,
    from_position: int | None,
    public_key: str | None,
    expect: str | None,
    include_archive: bool,
    as_json: bool,
) -> None:
    """Recompute the chain over the stored events; exit 1 on any divergence.

    Checks the witness, each event's bytes at its position (an UPDATE, DELETE, reorder or
    insertion by SQL shows as changed, missing, moved or unexpected), every checkpoint and
    its signature, and a published head."""
    from .progress import ProgressBars

    bars = ProgressBars()
    try:
        with open_reader(settings, archive=include_archive) as source:
            report = source.reader.integrity.verify(
                from_position=from_position,
                public_key=public_key,
                expect=expect,
                include_archive=include_archive,
                progress=lambda done, total: bars("verifying", done, total),
            )
    except ValueError as exc:  # a malformed --expect
        raise click.BadParameter(str(exc), param_hint="--expect") from None
    finally:
        bars.close()
    if as_json:
        echo_json(source.tagged(plain(report)))
    else:
        click.echo(_report_text(report))
    if not report.ok:
        raise SystemExit(DIVERGED_EXIT)


def _checkpoint_json(checkpoint: IntegrityCheckpoint) -> dict[str, Any]:
    return {
        "events": checkpoint.events,
        "position": checkpoint.position,
        "head": checkpoint.head.hex(),
        "short_head": short_head(checkpoint.events, checkpoint.head),
        "signed_by": None if checkpoint.public_key is None else key_id(checkpoint.public_key),
        "at": checkpoint.at.isoformat(),
    }


@integrity.command()
@_SIGNING_KEY
@json_option
@click.pass_obj
def checkpoint(settings: Settings, signing_key: str | None, as_json: bool) -> None:
    """Hash every final event into the chain and record a checkpoint of its head now."""
    with open_ledger(settings.url) as ledger:
        made = ledger.integrity.checkpoint(signing_key=signing_key)
        status = ledger.integrity.head()
    if as_json:
        echo_json({"checkpoint": None if made is None else _checkpoint_json(made)})
        return
    if made is None:
        reason = (
            "the last checkpoint is signed; give --signing-key"
            if status.last_checkpoint_key and signing_key is None
            else f"nothing new since the last checkpoint at {status.last_checkpoint_events} events"
        )
        click.echo(f"no checkpoint: {reason}")
        return
    signer = "unsigned" if made.public_key is None else f"signed by {key_id(made.public_key)}"
    click.echo(
        f"checkpoint at {made.events} events ({signer}): {short_head(made.events, made.head)}"
    )


@integrity.command()
@_SIGNING_KEY
@click.option(
    "--checkpoint-every",
    type=click.IntRange(min=1),
    default=CHECKPOINT_EVERY,
    show_default=True,
    metavar="N",
    help="Events between two checkpoints.",
)
@poll_option
@json_option
@click.pass_obj
def follow(
    settings: Settings, signing_key: str | None, checkpoint_every: int, poll: float, as_json: bool
) -> None:
    """Extend the chain as events commit, checkpointing it, until SIGINT/SIGTERM."""
    with open_ledger(settings.url) as ledger:
        runner = ledger.integrity.runner(signing_key=signing_key, checkpoint_every=checkpoint_every)

        def report(reports: list[CatchUp]) -> None:
            for item in reports:
                if item.applied:
                    if as_json:
                        click.echo(compact_json(item))
                    else:
                        click.echo(f"chained {item.applied} events; position {item.position}")

        follower = Follower(ledger.store, [], poll_s=poll, on_pass=report, also=[runner])
        stats = follow_until_signalled(follower, "following the history's hash chain")
    click.echo(f"stopped after {stats.passes} pass(es): chained {stats.applied} events", err=True)


@integrity.command()
@click.argument("path", type=click.Path(dir_okay=False))
@json_option
def keygen(path: str, as_json: bool) -> None:
    """Write a new ed25519 key pair: the private key at PATH (mode 0600), the public at
    PATH.pub. Keep the private key off the database's machines; publish the public one."""
    from ledger.core.integrity_checkpoints import raw_public_key
    from ledger.integrity.keys import load_public_key

    private_path, public_path = write_key_pair(path)
    key = key_id(raw_public_key(load_public_key(public_path)))
    if as_json:
        echo_json({"private": str(private_path), "public": str(public_path), "key_id": key})
        return
    click.echo(f"wrote {private_path} (private, 0600) and {public_path} (public); key {key}")
