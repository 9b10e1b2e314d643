"""The step graph: descendants of steps, and the first cycle.

Edges are given as ``prerequisites[step] = (its prerequisites, in the order asked)``. Every
walk goes in the order the steps and edges were given, so a message that names a cycle
names the same one for the same request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


def descendants(dependents: Mapping[str, Sequence[str]], roots: Iterable[str]) -> set[str]:
    """Every step reachable from ``roots`` through dependents (the roots excluded unless
    reachable from another)."""
    seen: set[str] = set()
    todo = [dependent for root in roots for dependent in dependents.get(root, ())]
    while todo:
        key = todo.pop()
        if key not in seen:
            seen.add(key)
            todo.extend(dependents.get(key, ()))
    return seen


def find_cycle(prerequisites: Mapping[str, Sequence[str]]) -> list[str] | None:
    """The first cycle met, in run order (``[a, b, c, a]``: a runs before b, b before c, c
    before a), or ``None`` for a DAG. Iterative depth-first search: no recursion limit on
    long chains."""
    done: set[str] = set()
    for start in prerequisites:
        if start in done:
            continue
        path: list[str] = [start]
        on_path = {start}
        iterators = [iter(prerequisites.get(start, ()))]
        while iterators:
            nxt = next(iterators[-1], None)
            if nxt is None:
                iterators.pop()
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
                continue
            if nxt in on_path:
                # path walks from dependents to prerequisites; reverse it into run order.
                cycle = [*path[path.index(nxt) :], nxt]
                return cycle[::-1]
            if nxt in done or nxt not in prerequisites:
                continue
            path.append(nxt)
            on_path.add(nxt)
            iterators.append(iter(prerequisites.get(nxt, ())))
    return None
