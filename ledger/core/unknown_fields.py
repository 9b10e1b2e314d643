"""Find a field that a struct type does not have, anywhere inside a map about to become one.

Events are lenient structs: decoding drops a key their class does not declare, which is right
for rows this code wrote, but an import file is outside input, and a key dropped there is
data lost without a word (a misspelt ``priorty``, a field of a newer schema written under an
old topic). :func:`unknown_field` walks the map and the type together, structs nested in
options, lists and dicts included, and names the first key no struct declares. Values typed
``Any`` (payloads, outputs, checkpoints: the caller's own JSON) are not walked.

Each struct type is compiled once into a check that compares the map's keys with the declared
ones as sets and descends only into the fields whose type can hold a struct: an import checks
every line, and walking every field of every event cost four times the rest of the
validation.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec.inspect as mi

Check = Callable[[Any], "str | None"]
"""``check(value)``: the path of the first unknown key in ``value``, relative to it (``colour``,
``[2].why``), or ``None``. Paths are built only on the way out of a failed check."""

_CHECKS: dict[type, Check | None] = {}
_SEQUENCES = (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)


def unknown_field(fields: dict[str, Any], cls: type[Any]) -> str | None:
    """The dotted path (``request.colour``, ``steps[2].kind_of``) of the first key in
    ``fields`` that ``cls`` (a msgspec struct) or a struct inside it does not declare, or
    ``None``. Only the shape is looked at: the types of the values are the decoder's business."""
    if cls not in _CHECKS:
        _CHECKS[cls] = _compile(mi.type_info(cls))
    check = _CHECKS[cls]
    return None if check is None else check(fields)


def _compile(info: mi.Type) -> Check | None:
    """The check for values of type ``info``; ``None`` when no struct can be inside one."""
    while isinstance(info, mi.Metadata):
        info = info.type
    if isinstance(info, mi.StructType):
        return _struct_check(info)
    if isinstance(info, mi.UnionType):
        return _union_check(info)
    if isinstance(info, _SEQUENCES):
        return _items_check(_compile(info.item_type))
    if isinstance(info, mi.TupleType):
        return _tuple_check([_compile(item) for item in info.item_types])
    if isinstance(info, mi.DictType):
        return _values_check(_compile(info.value_type))
    return None


def _struct_check(info: mi.StructType) -> Check:
    declared = frozenset(
        [field.encode_name for field in info.fields]
        + ([info.tag_field] if info.tag_field is not None else [])
    )
    inner = [
        (field.encode_name, field_check)
        for field in info.fields
        if (field_check := _compile(field.type)) is not None
    ]

    def check(value: Any) -> str | None:
        if not isinstance(value, dict):
            return None
        if not declared.issuperset(value):
            return next(str(key) for key in value if key not in declared)
        for key, check_field in inner:
            item = value.get(key)
            if item is not None:
                found = check_field(item)
                if found is not None:
                    return _within(key, found)
        return None

    return check


def _union_check(info: mi.UnionType) -> Check | None:
    """Dispatch on the value's JSON kind; tagged structs by their tag."""
    structs: list[tuple[str | None, Any, Check]] = []
    for_dict: Check | None = None
    for_list: Check | None = None
    for listed in info.types:
        member = listed
        while isinstance(member, mi.Metadata):
            member = member.type
        if isinstance(member, mi.StructType):
            structs.append((member.tag_field, member.tag, _struct_check(member)))
        elif isinstance(member, mi.DictType):
            for_dict = _compile(member)
        elif isinstance(member, (*_SEQUENCES, mi.TupleType)):
            for_list = _compile(member)
    if not structs and for_dict is None and for_list is None:
        return None

    def check(value: Any) -> str | None:
        if isinstance(value, dict):
            for tag_field, tag, check_struct in structs:
                if tag_field is None or value.get(tag_field) == tag:
                    return check_struct(value)
            return None if for_dict is None else for_dict(value)
        if isinstance(value, list) and for_list is not None:
            return for_list(value)
        return None

    return check


def _items_check(item: Check | None) -> Check | None:
    if item is None:
        return None

    def check(value: Any) -> str | None:
        if isinstance(value, list):
            for index, element in enumerate(value):
                found = item(element)
                if found is not None:
                    return _within(f"[{index}]", found)
        return None

    return check


def _tuple_check(items: list[Check | None]) -> Check | None:
    if all(item is None for item in items):
        return None

    def check(value: Any) -> str | None:
        if isinstance(value, list):
            for index, (element, item) in enumerate(zip(value, items, strict=False)):
                found = None if item is None else item(element)
                if found is not None:
                    return _within(f"[{index}]", found)
        return None

    return check


def _values_check(item: Check | None) -> Check | None:
    if item is None:
        return None

    def check(value: Any) -> str | None:
        if isinstance(value, dict):
            for key, element in value.items():
                found = item(element)
                if found is not None:
                    return _within(str(key), found)
        return None

    return check


def _within(step: str, found: str) -> str:
    """``found`` (a path inside a value) as a path from the value's parent, through ``step``
    (a key, or an index ``[2]``)."""
    return f"{step}{found}" if found.startswith("[") else f"{step}.{found}"
