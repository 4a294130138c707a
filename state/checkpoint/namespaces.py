"""The ``namespace`` column of keyed state and timer files: one struct that a Spark user can
query (``namespace.start`` of a window) and that decodes to the exact namespace object.

Flink writes a namespace with the state's namespace serializer (``VoidNamespaceSerializer``,
``TimeWindow.Serializer``: start and end as longs). Rill has no serializers, so the namespace
*type* picks the representation, from a registry:

``namespace: struct<type: string, start: bigint, end: bigint, id: bigint, value: binary>``

- ``type``: the registered name of the namespace's class (``"VoidNamespace"``, ``"TimeWindow"``,
  ``"GlobalWindow"``, ``"CountWindow"``), or ``"object"`` for an unregistered one;
- ``start`` / ``end``: a time window's bounds, epoch ms (``end`` exclusive); ``id``: a count
  window's id; null where the type has no such field;
- ``value``: an unregistered namespace, encoded by :mod:`rill.state.checkpoint.object_codec`.

A class is registered once by the module that defines it (:func:`register_namespace_type`):
``rill.state`` registers ``VoidNamespace``; ``rill.operators.windowing.windows`` registers the
windows (the state layer cannot import them). Decoding a registered name needs that module
imported, as unpickling needs a class's module: restoring a window operator imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
import itertools
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Type

import numpy as np
import pyarrow as pa

from rill.state.api import VoidNamespace
from rill.state.checkpoint.object_codec import decode_object, encode_object

__all__ = ["NAMESPACE_TYPE", "OBJECT_NAMESPACE", "register_namespace_type",
           "encode_namespaces", "encode_namespace_runs", "decode_namespaces"]

#: The Arrow type of the ``namespace`` column.
NAMESPACE_TYPE = pa.struct([
    pa.field("type", pa.string(), nullable=False),
    pa.field("start", pa.int64()),
    pa.field("end", pa.int64()),
    pa.field("id", pa.int64()),
    pa.field("value", pa.binary()),
])
_FIELDS = ("start", "end", "id")

#: The ``type`` of a namespace whose class is not registered (its ``value`` holds it).
OBJECT_NAMESPACE = "object"


@dataclass(frozen=True)
class _Codec:
    name: str
    to_fields: Callable[[Any], Mapping[str, int]]
    from_fields: Callable[[Mapping[str, Optional[int]]], Any]


_BY_CLASS: Dict[type, _Codec] = {}
_BY_NAME: Dict[str, _Codec] = {}


def register_namespace_type(cls: Type[Any], name: str,
                            to_fields: Callable[[Any], Mapping[str, int]],
                            from_fields: Callable[[Mapping[str, Optional[int]]], Any]) -> None:
    """Write namespaces of class ``cls`` (exactly that class) as ``type = name`` with the
    integer fields ``to_fields(namespace)`` gives (keys among ``start``, ``end``, ``id``), and
    read them back with ``from_fields({"start": ..., "end": ..., "id": ...})``.

    Registering the same class under the same name again is a no-op (a module reloaded).

    :raises ValueError: if ``name`` is ``"object"`` or already names another class, or ``cls``
        is registered under another name.
    """
    if name == OBJECT_NAMESPACE:
        raise ValueError(f"Namespace type name {name!r} is reserved for unregistered namespaces")
    known = _BY_NAME.get(name)
    if known is not None and _BY_CLASS.get(cls) is not known:
        raise ValueError(f"Namespace type name {name!r} is already registered for another class")
    if cls in _BY_CLASS and _BY_CLASS[cls].name != name:
        raise ValueError(f"Namespace class {cls.__qualname__} is already registered as "
                         f"{_BY_CLASS[cls].name!r}, not {name!r}")
    codec = _Codec(name, to_fields, from_fields)
    _BY_CLASS[cls] = codec
    _BY_NAME[name] = codec


register_namespace_type(VoidNamespace, "VoidNamespace", lambda ns: {}, lambda f: VoidNamespace())


def _constant(namespace: Any, n: int) -> pa.StructArray:
    """The column of ``n`` times the same namespace (all VoidNamespace: most keyed state),
    repeated by Arrow (no Python list of ``n`` elements)."""
    codec = _BY_CLASS.get(type(namespace))
    name = OBJECT_NAMESPACE if codec is None else codec.name
    value = encode_object(namespace) if codec is None else None
    given = {} if codec is None else codec.to_fields(namespace)
    return pa.StructArray.from_arrays(
        [pa.repeat(pa.scalar(name, pa.string()), n),
         *(pa.repeat(pa.scalar(given.get(f), pa.int64()), n) for f in _FIELDS),
         pa.repeat(pa.scalar(value, pa.binary()), n)],
        fields=list(NAMESPACE_TYPE))


def _each(namespaces: Sequence[Any]) -> pa.StructArray:
    types: List[str] = []
    fields: Dict[str, List[Optional[int]]] = {f: [] for f in _FIELDS}
    values: List[Optional[bytes]] = []
    for ns in namespaces:
        codec = _BY_CLASS.get(type(ns))
        if codec is None:
            types.append(OBJECT_NAMESPACE)
            values.append(encode_object(ns))
            for column in fields.values():
                column.append(None)
            continue
        types.append(codec.name)
        values.append(None)
        given = codec.to_fields(ns)
        for f, column in fields.items():
            column.append(given.get(f))
    return pa.StructArray.from_arrays(
        [pa.array(types, pa.string()), *(pa.array(fields[f], pa.int64()) for f in _FIELDS),
         pa.array(values, pa.binary())],
        fields=list(NAMESPACE_TYPE))


def encode_namespaces(namespaces: Sequence[Any]) -> pa.StructArray:
    """The ``namespace`` column of ``namespaces`` (one struct per namespace). Namespaces of one
    class (the timers of a window operator: many timers per window) are encoded once per
    distinct value and repeated by Arrow (``take``); the per-element work is C-level hashing."""
    n = len(namespaces)
    if n:
        first = namespaces[0]
        if all(ns is first for ns in namespaces):
            return _constant(first, n)
        kinds = set(map(type, namespaces))
        if len(kinds) == 1 and type(first) in _BY_CLASS:  # one registered class: equal ones encode alike
            index: Dict[Any, int] = {}
            # setdefault keeps the position of a value's first occurrence: sparse codes < n
            codes = np.fromiter(map(index.setdefault, namespaces, itertools.count()), np.int64, n)
            if len(index) < n:
                dense = np.empty(n, np.int32)
                dense[np.fromiter(index.values(), np.int64, len(index))] = np.arange(len(index), dtype=np.int32)
                return _each(list(index)).take(pa.array(dense[codes]))
    return _each(namespaces)


def encode_namespace_runs(runs: Sequence[Tuple[Any, int]]) -> pa.StructArray:
    """The ``namespace`` column of ``(namespace, rows)`` runs: each namespace repeated for its
    run's rows (a keyed-state file writes one run per namespace and key group). O(runs) Python
    work; the repetition is Arrow's."""
    total = sum(count for _, count in runs)
    if runs:
        first = runs[0][0]
        if all(ns is first for ns, _ in runs):
            return _constant(first, total)
    counts = np.fromiter((count for _, count in runs), np.int64, len(runs))
    positions = np.repeat(np.arange(len(runs), dtype=np.int32), counts)
    return encode_namespaces([ns for ns, _ in runs]).take(pa.array(positions))


def decode_namespaces(column: pa.Array) -> List[Any]:
    """The namespaces of a ``namespace`` column (a struct array or chunked array).

    :raises ValueError: for a ``type`` no loaded module registered.
    """
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    n = len(column)
    kinds = column.field("type").unique()
    if n and len(kinds) == 1 and kinds[0].as_py() != OBJECT_NAMESPACE and all(
            column.field(f).null_count == n for f in _FIELDS):
        # One type without fields (VoidNamespace, GlobalWindow): one object for every row.
        return [_decode(kinds[0].as_py(), {"start": None, "end": None, "id": None})] * n
    types = column.field("type").to_pylist()
    starts = column.field("start").to_pylist()
    ends = column.field("end").to_pylist()
    ids = column.field("id").to_pylist()
    values = column.field("value").to_pylist()
    out: List[Any] = []
    cached: Dict[str, _Codec] = {}
    for i, name in enumerate(types):
        if name == OBJECT_NAMESPACE:
            out.append(decode_object(values[i]))
            continue
        codec = cached.get(name) or _codec_named(name)
        cached[name] = codec
        out.append(codec.from_fields({"start": starts[i], "end": ends[i], "id": ids[i]}))
    return out


def _codec_named(name: str) -> _Codec:
    codec = _BY_NAME.get(name)
    if codec is None:
        raise ValueError(
            f"Snapshot namespace type {name!r} is not registered: import the module that "
            f"defines it (windows: rill.operators.windowing) before reading the snapshot")
    return codec


def _decode(name: str, fields: Mapping[str, Optional[int]]) -> Any:
    return _codec_named(name).from_fields(fields)
