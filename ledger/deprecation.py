"""Deprecated spellings: one :class:`DeprecationWarning` per old name per process.

The feature namespaces (``ledger.workflows.submit(...)``, issue 29) replaced methods of the
facade (``ledger.start_workflow(...)``); the old methods stay one release as thin aliases
(:mod:`ledger.api.deprecated`), each warning once, naming its new spelling, so a program that
calls one in a loop is told once and not flooded. The feature namespaces use it too (a
namespace that was a method, ``reader.workflows(...)``, is still callable), so it sits below
them, beside the clock.
"""

from __future__ import annotations

import threading
import warnings

_warned: set[str] = set()
_lock = threading.Lock()


def warn_once(old: str, new: str) -> None:
    """Warn that ``old`` is deprecated in favour of ``new``, the first time it is used in
    this process (a :class:`DeprecationWarning` pointing at the caller's caller: the line
    that used the old spelling)."""
    with _lock:
        if old in _warned:
            return
        _warned.add(old)
    warnings.warn(
        f"{old} is deprecated and goes in the next release: use {new}",
        DeprecationWarning,
        stacklevel=3,
    )


def forget_warnings() -> None:
    """Warn again for every old spelling (for the tests that prove each warns once)."""
    with _lock:
        _warned.clear()
