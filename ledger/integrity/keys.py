"""Reading the checkpoints' keys from files, and writing a new pair (``integrity keygen``).

Ed25519 in PEM: the private key as PKCS #8 (unencrypted: the file's permissions guard it,
as an SSH host key's do), the public key as SubjectPublicKeyInfo. The PyCA ``cryptography``
package parses and writes both; nothing here handles key bytes itself.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    load_pem_private_key,
    load_pem_public_key,
)

from ledger.core.errors import InvalidRequestError


def load_signing_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """The ed25519 private key in the PEM file at ``path``."""
    data = _read(path, "signing key")
    try:
        key = load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise InvalidRequestError(f"{path} is not an unencrypted PEM private key: {exc}") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise InvalidRequestError(f"{path} holds a {type(key).__name__}, not an ed25519 key")
    return key


def load_public_key(path: str | os.PathLike[str]) -> Ed25519PublicKey:
    """The ed25519 public key in the PEM file at ``path`` (a private key's file gives its
    public half)."""
    data = _read(path, "public key")
    try:
        key = load_pem_public_key(data)
    except ValueError:
        try:
            return load_signing_key(path).public_key()
        except InvalidRequestError:
            raise InvalidRequestError(
                f"{path} is not a PEM ed25519 public key (nor a private key's file)"
            ) from None
    if not isinstance(key, Ed25519PublicKey):
        raise InvalidRequestError(f"{path} holds a {type(key).__name__}, not an ed25519 key")
    return key


def write_key_pair(path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """A new key pair: the private key at ``path`` (mode 0600, never overwritten), the
    public key beside it at ``path`` + ``.pub``; both paths."""
    private_path = Path(path)
    public_path = private_path.with_name(private_path.name + ".pub")
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    public_pem = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    try:
        fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError as exc:
        raise InvalidRequestError(f"{private_path} exists; not overwriting a key") from exc
    with os.fdopen(fd, "wb") as out:
        out.write(private_pem)
    public_path.write_bytes(public_pem)
    return private_path, public_path


def _read(path: str | os.PathLike[str], what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InvalidRequestError(f"cannot read the {what} {path}: {exc.strerror}") from exc


def public_key_of(
    key: Ed25519PublicKey | str | os.PathLike[str] | None,
) -> Ed25519PublicKey | None:
    """``key`` as a key object: read from its PEM file when it is a path."""
    return load_public_key(key) if isinstance(key, str | os.PathLike) else key
