"""The end of an exchange file: counts and a digest of every line before it.

A file of format version 2 ends with one trailer line (:func:`trailer_line`). Without it a
file cut short at a line boundary (``head -n 20``, a copy that stopped, an export that died)
is itself a well-formed history, of jobs stopped mid-way: a dead job arrives leased. So the
writer digests each line as it writes it (:class:`FileDigest`, streaming: an export is never
held whole), and the reader digests each line as it reads it and refuses the file when the
trailer is missing, or its counts or digest are not the file's.

The digest says the file is the one the export wrote, whole; it does not say who wrote it
(anyone who edits the file can write a new trailer). A sealed export (format version 3) adds
who: a ``chain`` key (:class:`ChainSeal`) with the source's hash chain head and an ed25519
signature over the digest and that head (``docs/export-format.md``, "The trailer").

Pure: hashing and signatures, no I/O (``cryptography`` imported where a seal is checked).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

DIGEST_ALGORITHM = "sha256"


class StreamCounts(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Streams in the file by kind (the line's ``kind``): job types', jobs', workflow runs'."""

    job_type: int
    job: int
    workflow: int


class ChainSeal(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A sealed (version-3) file's provenance: the source ledger's hash chain head when it was
    exported (``events`` chained, the last at ``position``; ``head`` in hex), and an ed25519
    ``signature`` (hex) by ``public_key`` (hex, raw) over :func:`seal_message`: the file's
    digest bound to that head. Anyone can check the file is whole; only the key's holder
    could have sealed it (docs/integrity.md, "Exports")."""

    events: int
    position: int
    head: str
    public_key: str
    signature: str


class Trailer(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """What the file holds before its last line: event lines, streams by kind, and the
    digest (``sha256:<64 hex>``) of every byte before the trailer, header included; a sealed
    file's (version 3) also its :class:`ChainSeal` (left out of the line when unset, so a
    version-2 trailer's bytes are as before)."""

    events: int
    streams: StreamCounts
    digest: str
    chain: ChainSeal | None = None


SEAL_FORMAT = b"jl-export-1"


def seal_message(digest: str, events: int, position: int, head: bytes) -> bytes:
    """The bytes a seal's signature covers: the file's digest and the chain head."""
    from ledger.core.integrity_checkpoints import checkpoint_message

    return SEAL_FORMAT + digest.encode() + checkpoint_message(events, position, head)


def make_seal(
    key: Ed25519PrivateKey, digest: str, events: int, position: int, head: bytes
) -> ChainSeal:
    """The seal of a file of ``digest`` exported at the chain head ``head`` (``events``
    chained, the last at ``position``), signed with ``key``."""
    from ledger.core.integrity_checkpoints import raw_public_key

    signature = key.sign(seal_message(digest, events, position, head))
    return ChainSeal(
        events=events,
        position=position,
        head=head.hex(),
        public_key=raw_public_key(key.public_key()).hex(),
        signature=signature.hex(),
    )


def seal_problem(seal: ChainSeal, digest: str, trusted: Ed25519PublicKey | None) -> str | None:
    """Why ``seal`` does not prove that the holder of ``trusted`` (without one: of the key the
    seal carries) exported the file whose digest is ``digest``, or ``None`` if it does."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from ledger.core.integrity_checkpoints import key_id, raw_public_key

    try:
        public_key = bytes.fromhex(seal.public_key)
        signature = bytes.fromhex(seal.signature)
        head = bytes.fromhex(seal.head)
    except ValueError:
        return "the seal's key, signature or head is not hex"
    if trusted is not None and public_key != raw_public_key(trusted):
        return f"sealed by key {key_id(public_key)}, not by the key given"
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(
            signature, seal_message(digest, seal.events, seal.position, head)
        )
    except (InvalidSignature, ValueError):
        return "the signature does not match the file's digest and chain head"
    return None


class _TrailerLine(msgspec.Struct, forbid_unknown_fields=True):
    trailer: Trailer


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(_TrailerLine)


class FileDigest:
    """The running digest of a file's bytes, fed line by line (or in chunks of whole lines)."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def update(self, data: bytes) -> None:
        self._hash.update(data)

    def value(self) -> str:
        return f"{DIGEST_ALGORITHM}:{self._hash.hexdigest()}"


def trailer_line(trailer: Trailer) -> bytes:
    """The last line of a version-2 or version-3 file (with its newline)."""
    return _encoder.encode(_TrailerLine(trailer)) + b"\n"


def is_trailer(raw: bytes) -> bool:
    """Whether ``raw`` is meant as the trailer: an object whose first key is ``trailer`` (as
    the writer spells it; an event line starts with ``stream``)."""
    return raw.lstrip().startswith(b'{"trailer"')


def parse_trailer(raw: bytes) -> Trailer:
    """A trailer line's content; raises ``ValueError`` naming what is wrong with it."""
    try:
        return _decoder.decode(raw).trailer
    except msgspec.DecodeError as exc:
        raise ValueError(f"not a trailer ({exc})") from None
    except RecursionError:
        raise ValueError("not a trailer (nested too deep to decode)") from None


def mismatch(stated: Trailer, found: Trailer) -> str | None:
    """What differs between the trailer a file states and what its lines hold, or ``None``."""
    if stated.events != found.events:
        return f"the trailer counts {stated.events} event lines, the file holds {found.events}"
    if stated.streams != found.streams:
        return (
            f"the trailer counts streams {_streams(stated.streams)}, "
            f"the file holds {_streams(found.streams)}"
        )
    if stated.digest != found.digest:
        return f"the trailer's digest is {stated.digest}, the file's is {found.digest}"
    return None


def _streams(counts: StreamCounts) -> str:
    return ", ".join(f"{name} {getattr(counts, name)}" for name in counts.__struct_fields__)
