"""Find a field that a struct type does not have, anywhere inside a map about to become one.

Events are lenient structs: decoding drops a key their class does not declare, which is right
for rows this code wrote, but an import file is outside input, and a key dropped there is
data lost without a word (a misspelt ``priorty``, a field of a newer schema written under an
old topic). :func:`unknown_field` walks the map and the type together, structs nested in
options, lists and dicts included, and names the first key no struct declares. Values typed
``Any`` (payloads, outputs, checkpoints: the caller's own JSON) are not walked.

Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

import msgspec.inspect as mi

_INFO: dict[type, mi.Type] = {}


def unknown_field(fields: dict[str, Any], cls: type[Any]) -> str | None:
    """The dotted path (``request.colour``, ``steps[2].kind_of``) of the first key in
    ``fields`` that ``cls`` (a msgspec struct) or a struct inside it does not declare, or
    ``None``. Only the shape is looked at: the types of the values are the decoder's business."""
    info = _INFO.get(cls)
    if info is None:
        info = _INFO[cls] = mi.type_info(cls)
    return _walk(fields, info, "")


def _walk(value: Any, info: mi.Type, path: str) -> str | None:
    info = _bare(info)
    if isinstance(info, mi.UnionType):
        member = _member(value, info)
        return None if member is None else _walk(value, member, path)
    if isinstance(info, mi.StructType):
        return _struct(value, info, path) if isinstance(value, dict) else None
    if isinstance(info, mi.ListType | mi.VarTupleType | mi.SetType | mi.FrozenSetType):
        items = enumerate(value) if isinstance(value, list) else ()
        return _first(_walk(item, info.item_type, f"{path}[{i}]") for i, item in items)
    if isinstance(info, mi.TupleType):
        pairs = zip(value, info.item_types, strict=False) if isinstance(value, list) else ()
        return _first(_walk(item, t, f"{path}[{i}]") for i, (item, t) in enumerate(pairs))
    if isinstance(info, mi.DictType) and isinstance(value, dict):
        return _first(
            _walk(item, info.value_type, _join(path, str(k))) for k, item in value.items()
        )
    return None


def _struct(value: dict[str, Any], info: mi.StructType, path: str) -> str | None:
    declared = {field.encode_name: field for field in info.fields}
    for key, item in value.items():
        if key == info.tag_field:
            continue
        field = declared.get(key)
        if field is None:
            return _join(path, key)
        inner = _walk(item, field.type, _join(path, key))
        if inner is not None:
            return inner
    return None


def _member(value: Any, info: mi.UnionType) -> mi.Type | None:
    """The member of a union that ``value`` decodes as (tagged structs by their tag)."""
    for member in map(_bare, info.types):
        if isinstance(value, dict):
            if isinstance(member, mi.StructType) and (
                member.tag_field is None or value.get(member.tag_field) == member.tag
            ):
                return member
            if isinstance(member, mi.DictType):
                return member
        elif isinstance(value, list) and isinstance(
            member, mi.ListType | mi.VarTupleType | mi.TupleType | mi.SetType | mi.FrozenSetType
        ):
            return member
    return None


def _bare(info: mi.Type) -> mi.Type:
    """The type under any constraints (``Annotated[int, Meta(ge=0)]`` is an ``int``)."""
    while isinstance(info, mi.Metadata):
        info = info.type
    return info


def _first(found: Any) -> str | None:
    return next((path for path in found if path is not None), None)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
