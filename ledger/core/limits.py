"""The bounds on every value the ledger stores, and the checks that hold them.

One rule per kind of value, the same on SQLite and PostgreSQL, applied on every way in
(enqueue, import, worker writes, operator writes), so that nothing is stored that a reader, an
export or the other backend could not take back:

- **JSON values** (payloads, outputs, checkpoints): objects with string keys, arrays, strings,
  booleans, null, integers that fit in 64 bits (signed) and finite floats; nested at most
  :data:`MAX_JSON_DEPTH` levels; at most :data:`MAX_JSON_BYTES` as JSON. NaN and Infinity are
  refused (JSON has no spelling for them; an encoder would silently write ``null``).
- **Text** anywhere (names, messages, reasons, JSON strings): no NUL character (PostgreSQL's
  ``text`` cannot hold one) and no lone surrogate (not encodable as UTF-8).
- **Names** (job type, org, queue, stage, worker id, idempotency key, source id): non-empty,
  at most :data:`MAX_NAME_LENGTH` characters, no control characters.
- **Failure codes**: at most :data:`MAX_NAME_LENGTH` characters of :data:`CODE_CHARSET`.
- **Failure messages** are normalised, not refused (a worker's failure is recorded whatever
  its exception says): NUL and lone surrogates spelled as escapes, cut to
  :data:`MAX_MESSAGE_BYTES`. Reasons over that size are refused.
- **Sync subjects**: a subject's URI and revision (and a success's content hash) are text of
  at most :data:`MAX_SUBJECT_BYTES` as UTF-8.
- **Durations**: positive (or non-negative) and finite, a lease at most :data:`MAX_LEASE_S`,
  any other at most :data:`MAX_DURATION_S`, so that ``now + duration`` is a storable time.

Every refusal is an :class:`~ledger.core.errors.InvalidRequestError` (``request.invalid``).
The walk over JSON values is iterative: a value nested too deep is refused, never a
RecursionError. Pure: no store, driver or clock.
"""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Any

import msgspec

from ledger.core.errors import InvalidRequestError

MAX_JSON_BYTES = 1024 * 1024
"""The largest payload, output or checkpoint (as JSON); larger data belongs in a blob store."""

MAX_JSON_DEPTH = 64
"""The deepest nesting of objects and arrays in a JSON value (``{"a": 1}`` is depth 1)."""

MAX_NAME_LENGTH = 200
"""The longest name or failure code, in characters."""

MAX_MESSAGE_BYTES = 8 * 1024
"""A failure message longer than this (as UTF-8) is cut to it; a reason longer is refused."""

MAX_SUBJECT_BYTES = 1800
"""The longest sync-subject URI or revision (and content hash), as UTF-8. The URI is indexed
with its source id on both backends (the live-job and sync-state lookups); with the longest
source id (200 characters, up to 800 bytes) an entry stays under PostgreSQL's btree limit of
2704 bytes, which a longer URI broke with a store error on PostgreSQL alone (SQLite took 50 MB)."""

MAX_LEASE_S = 7 * 24 * 3600.0
"""The longest lease a claim or heartbeat may take: a week."""

MAX_DURATION_S = 100 * 365 * 24 * 3600.0
"""The longest timeout or delay: a century keeps ``now + duration`` a storable time."""

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
CODE_CHARSET = "A-Z a-z 0-9 . _ - :"
_CODE = re.compile(r"[A-Za-z0-9._:-]+")
TRUNCATED = "… [truncated]"


def check_text(value: str, what: str) -> None:
    """Refuse a string holding NUL or a lone surrogate: PostgreSQL cannot store the first,
    UTF-8 cannot encode the second."""
    if "\x00" in value:
        raise InvalidRequestError(f"{what} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequestError(f"{what} contains a lone surrogate (not UTF-8)") from None


def check_subject_text(value: object, what: str) -> None:
    """Refuse a subject's URI or revision that is not a string, holds NUL or a lone
    surrogate, or is over :data:`MAX_SUBJECT_BYTES` as UTF-8."""
    if not isinstance(value, str):
        raise InvalidRequestError(f"{what} must be a string")
    check_text(value, what)
    if len(value) * 4 > MAX_SUBJECT_BYTES and len(value.encode("utf-8")) > MAX_SUBJECT_BYTES:
        size = len(value.encode("utf-8"))
        raise InvalidRequestError(f"{what} is {size} bytes; the limit is {MAX_SUBJECT_BYTES}")


def has_control(value: str) -> bool:
    """Whether ``value`` holds a control character (C0, DEL or C1: Unicode category Cc)."""
    return any(unicodedata.category(char) == "Cc" for char in value)


def check_name(value: object, what: str, *, optional: bool = False) -> None:
    """Refuse a name that is empty, over ``MAX_NAME_LENGTH``, or holds a control character,
    NUL or lone surrogate."""
    if value is None and optional:
        return
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequestError(f"{what} must be a non-empty string")
    if len(value) > MAX_NAME_LENGTH:
        raise InvalidRequestError(f"{what} is longer than {MAX_NAME_LENGTH} characters")
    if value.isascii() and value.isprintable():
        # The usual name, in two C calls: printable ASCII holds no NUL, no surrogate and no
        # control character (ASCII's only Cc are 0x00-0x1F and 0x7F, all unprintable).
        return
    check_text(value, what)
    if has_control(value):
        raise InvalidRequestError(f"{what} contains a control character")


def check_code(value: object, what: str = "failure code") -> None:
    """Refuse a failure code that is empty, over ``MAX_NAME_LENGTH`` or outside
    :data:`CODE_CHARSET` (codes are matched by scripts and shown unquoted)."""
    if not isinstance(value, str) or not value:
        raise InvalidRequestError(f"{what} must be a non-empty string")
    if len(value) > MAX_NAME_LENGTH:
        raise InvalidRequestError(f"{what} is longer than {MAX_NAME_LENGTH} characters")
    if _CODE.fullmatch(value) is None:
        raise InvalidRequestError(f"{what} {value[:40]!r} has characters outside {CODE_CHARSET}")


def bounded_message(value: str) -> str:
    """A failure message made storable: NUL spelled ``\\x00``, a lone surrogate as its
    ``\\udXXX`` escape, then cut to ``MAX_MESSAGE_BYTES`` of UTF-8 ending in
    :data:`TRUNCATED`. A message already storable and within the bound comes back unchanged,
    so normalising twice is normalising once (decision replay re-decides recorded failures)."""
    text = value.replace("\x00", "\\x00")
    encoded = text.encode("utf-8", errors="backslashreplace")
    if len(encoded) <= MAX_MESSAGE_BYTES:
        return encoded.decode("utf-8")
    room = MAX_MESSAGE_BYTES - len(TRUNCATED.encode("utf-8"))
    return encoded[:room].decode("utf-8", errors="ignore") + TRUNCATED


def check_reason(reason: object) -> None:
    """Refuse a release, cancel or requeue reason that is not text within the bounds."""
    if not isinstance(reason, str):
        raise InvalidRequestError("reason must be a string")
    check_text(reason, "reason")
    if len(reason.encode("utf-8")) > MAX_MESSAGE_BYTES:
        raise InvalidRequestError(f"reason is longer than {MAX_MESSAGE_BYTES} bytes")


def check_actor(actor: object) -> None:
    """Refuse an event's ``actor`` (who asked: ``api token <id>``) that is not text within
    the bounds of a reason."""
    if not isinstance(actor, str) or not actor:
        raise InvalidRequestError("actor must be a non-empty string")
    check_text(actor, "actor")
    if len(actor.encode("utf-8")) > MAX_MESSAGE_BYTES:
        raise InvalidRequestError(f"actor is longer than {MAX_MESSAGE_BYTES} bytes")


def check_count(value: object, what: str) -> None:
    """Refuse anything but a whole number in ``0 .. INT64_MAX``."""
    if type(value) is not int or not 0 <= value <= INT64_MAX:
        raise InvalidRequestError(f"{what} must be a whole number from 0 to 2**63 - 1")


def check_seconds(
    value: object, what: str, *, most: float = MAX_DURATION_S, zero: bool = False
) -> float:
    """A duration in seconds: a finite number above 0 (or at least 0 with ``zero``), at most
    ``most``; returns it as a float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidRequestError(f"{what} must be a number of seconds")
    seconds = float(value) if math.isfinite(value) else math.nan
    low_ok = seconds >= 0 if zero else seconds > 0
    if not (low_ok and seconds <= most):
        floor = ">= 0" if zero else "> 0"
        raise InvalidRequestError(f"{what} must be a number of seconds {floor} and <= {most:g}")
    return seconds


def check_setting_seconds(
    value: object, what: str, *, most: float = MAX_DURATION_S, zero: bool = False
) -> None:
    """:func:`check_seconds` for a setting of a service (an interval, a delay, a lease, a
    cooldown): the same bound, raised as the ``ValueError`` a bad setting is, at
    construction, rather than as an ``OverflowError`` at the first pass that adds it to now."""
    try:
        check_seconds(value, what, most=most, zero=zero)
    except InvalidRequestError as exc:
        raise ValueError(exc.message) from None


def _bad_scalar(value: Any, what: str) -> InvalidRequestError | None:
    """Why ``value`` (not a container) is not a storable JSON scalar; ``None`` if it is."""
    kind = type(value)
    if kind is str or isinstance(value, str):
        if "\x00" in value:
            return InvalidRequestError(f"a string in {what} contains a NUL character")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return InvalidRequestError(f"a string in {what} contains a lone surrogate")
        return None
    if value is None or kind is bool:
        return None
    if kind is int or isinstance(value, int):
        if INT64_MIN <= value <= INT64_MAX:
            return None
        return InvalidRequestError(f"{what} holds an integer beyond 64 bits")
    if kind is float or isinstance(value, float):
        if math.isfinite(value):
            return None
        return InvalidRequestError(f"{what} holds {value!r}, which JSON cannot represent")
    return InvalidRequestError(
        f"{what} is not JSON-serialisable: {kind.__name__} is not a JSON value"
    )


def flat_plain(value: dict[Any, Any]) -> bool:
    """Whether ``value`` is an object of plain scalars that the rules allow (string keys
    without NUL; strings without NUL, 64-bit integers, finite floats, booleans, null): what
    most payloads are. ``False`` sends the value to the full walk, which says what is wrong.
    Lone surrogates are left to the encoding, as on the walk's path."""
    for key, child in value.items():
        if type(key) is not str or "\x00" in key:
            return False
        kind = type(child)
        if kind is str:
            if "\x00" in child:
                return False
        elif kind is int:
            if not INT64_MIN <= child <= INT64_MAX:
                return False
        elif kind is float:
            if not math.isfinite(child):
                return False
        elif child is not None and kind is not bool:
            return False
    return True


def check_json(value: Any, what: str, *, max_bytes: int = MAX_JSON_BYTES) -> bytes:
    """Refuse a value outside the JSON rules above; returns its JSON encoding.

    Walks the value with an explicit stack of containers (each node once), so a value nested
    ten thousand deep is refused by depth, not by a RecursionError in an encoder."""
    containers = (dict, list, tuple)
    stack: list[tuple[Any, int]] = []
    if type(value) is dict and flat_plain(value):
        pass  # the usual payload, checked in one loop; the encoding below does the rest
    elif isinstance(value, containers):
        stack.append((value, 1))
    else:
        error = _bad_scalar(value, what)
        if error is not None:
            raise error
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise InvalidRequestError(f"{what} is nested deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(item, dict):
            for key in item:
                if type(key) is not str:
                    raise InvalidRequestError(f"{what} has a key that is not a string")
                if "\x00" in key:
                    raise InvalidRequestError(f"a key in {what} contains a NUL character")
            children: Any = item.values()
        else:
            children = item
        for child in children:
            if isinstance(child, containers):
                stack.append((child, depth + 1))
            elif type(child) is not str or "\x00" in child:
                error = _bad_scalar(child, what)
                if error is not None:
                    raise error
    return encode_json(value, what, max_bytes=max_bytes)


def encode_json(value: Any, what: str, *, max_bytes: int = MAX_JSON_BYTES) -> bytes:
    """The JSON encoding of a value already walked (:func:`check_json`, :func:`flat_plain`):
    refuses a lone surrogate and more than ``max_bytes``, the rules the walk leaves to it."""
    try:
        encoded = msgspec.json.encode(value)
    except UnicodeEncodeError:
        raise InvalidRequestError(f"{what} holds a lone surrogate (not UTF-8)") from None
    except TypeError as error:  # a subclass of str, int or float the walk let by
        raise InvalidRequestError(f"{what} is not JSON-serialisable: {error}") from None
    if len(encoded) > max_bytes:
        raise InvalidRequestError(f"{what} is {len(encoded)} bytes; the limit is {max_bytes}")
    return encoded
