"""The chain's checkpoints: events that record its head up to a point, signed with a key.

An :class:`IntegrityCheckpoint` says "after the first ``events`` events of the chain (the last
at notification id ``position``), the chain's head is ``head``". It is appended to a stream of
its own (:data:`INTEGRITY_STREAM_ID`), so it is itself hashed into the chain later, like any
event. With a signing key (ed25519, through the PyCA ``cryptography`` package) it carries the
public key and a signature over :func:`checkpoint_message`: whoever can write to the database
can recompute every digest, but cannot sign a new head without the key, and cannot change
what an operator published elsewhere (:func:`short_head`). docs/integrity.md says what this
guarantees against whom.

Pure: keys come in as objects (the shell reads the files). ``hashlib`` and ``cryptography``
are imported where used, not here: the codec imports this module for the event, and a read
command that decodes events must not load OpenSSL for it (tests/cli/test_cli_lazy_commands.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import UUID

from ledger.core.events import Event

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

INTEGRITY_STREAM_ID = UUID("465ccb16-2d8d-5466-98f8-90b9d0504d83")
"""The originator id of the checkpoints' stream (stable across databases):
``uuid5(RETENTION_NAMESPACE, "integrity")``, written out as retention's is."""

MESSAGE_FORMAT = b"jl-checkpoint-1"


class IntegrityCheckpoint(Event, frozen=True):
    """The chain's head after its first ``events`` events (see the module docstring).

    ``transaction_id`` and ``position`` are the tail position of the last of them;
    ``public_key`` (raw, 32 bytes) and ``signature`` are ``None`` for an unsigned checkpoint."""

    name = "integrity_checkpoint"
    events: int
    position: int
    transaction_id: int
    head: bytes
    public_key: bytes | None
    signature: bytes | None


INTEGRITY_EVENTS: tuple[type[Event], ...] = (IntegrityCheckpoint,)


def checkpoint_message(events: int, position: int, head: bytes) -> bytes:
    """The bytes a checkpoint's signature covers."""
    return (
        MESSAGE_FORMAT
        + events.to_bytes(8, "big", signed=True)
        + position.to_bytes(8, "big", signed=True)
        + head
    )


def raw_public_key(key: Ed25519PublicKey) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def key_id(public_key: bytes) -> str:
    """A short name for a public key (the first 16 hex digits of its SHA-256)."""
    import hashlib

    return hashlib.sha256(public_key).hexdigest()[:16]


def signed(
    key: Ed25519PrivateKey | None, events: int, position: int, head: bytes
) -> tuple[bytes | None, bytes | None]:
    """The public key and signature a checkpoint carries (``(None, None)`` without a key)."""
    if key is None:
        return None, None
    message = checkpoint_message(events, position, head)
    return raw_public_key(key.public_key()), key.sign(message)


def signature_problem(
    checkpoint: IntegrityCheckpoint, trusted: Ed25519PublicKey | None
) -> str | None:
    """Why ``checkpoint``'s signature does not hold, or ``None`` if it does.

    With ``trusted`` (the operator's public key) the checkpoint must be signed by it; without,
    a signed checkpoint must hold under the key it carries (an unsigned one passes: there is
    nothing to check)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if checkpoint.signature is None or checkpoint.public_key is None:
        return "unsigned, but a public key was given" if trusted is not None else None
    if trusted is not None and checkpoint.public_key != raw_public_key(trusted):
        return f"signed by key {key_id(checkpoint.public_key)}, not by the key given"
    try:
        key = Ed25519PublicKey.from_public_bytes(checkpoint.public_key)
        key.verify(
            checkpoint.signature,
            checkpoint_message(checkpoint.events, checkpoint.position, checkpoint.head),
        )
    except (InvalidSignature, ValueError):
        return "the signature does not match the checkpoint"
    return None


def short_head(events: int, head: bytes) -> str:
    """What an operator publishes: the event count and the head's first 32 hex digits
    (128 bits: finding another history with the same prefix is as hard as a collision of a
    128-bit hash)."""
    return f"{events}:{head.hex()[:32]}"


def parse_short_head(text: str) -> tuple[int, str]:
    """``(events, hex prefix)`` of a :func:`short_head` (``ValueError`` if malformed)."""
    count, sep, prefix = text.strip().partition(":")
    if not sep or not count.isdigit() or len(prefix) < 16:
        raise ValueError(f"not a published head (EVENTS:HEX, 16 hex digits or more): {text!r}")
    int(prefix, 16)
    return int(count), prefix.lower()
