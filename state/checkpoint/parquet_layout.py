"""The Parquet files of one operator subtask's snapshot: keyed state (one file per state), timers
and operator state (one file each), their columns, and the reading of a key-group range.

Every file reads with ``spark.read.parquet`` under Spark's default settings (µs timestamps, no
unsigned or time types, no column names differing only in case), and the files of one state of
one operator, one per subtask, share one schema, so a directory reads as one table.

Keyed state (per state), rows sorted by key group:

==================  ==========================================================================
column              content
==================  ==========================================================================
checkpoint_id       bigint
operator_uid        string (null when the operator has no uid)
operator_id         string, 32 hex digits
state_name          string
key_group           int
key                 the key type's column when declared (``KeyedStateSnapshot.key_type``),
                    else msgpack binary (:mod:`.object_codec`)
namespace           struct, see :mod:`.namespaces` (windows: ``namespace.start/end``)
value               the stored value: see :mod:`.arrow_types`; list state ``array<element>``,
                    map state ``map<key, value>``, TTL states wrap the user value as
                    ``struct<user_value, last_access_timestamp_ms>`` (per element / entry)
partition_id        int, the subtask that wrote the row (as Spark's state data source)
==================  ==========================================================================

A keyed file is cut into row groups at key-group boundaries: a row group holds whole key groups,
a contiguous run, and is closed once it has :data:`ROW_GROUP_TARGET_ROWS` rows. The writer
returns, per row group, ``[first key group, last key group, rows]``; a reader of a key-group
range reads only the row groups that overlap it (:func:`plan_row_groups`). One row group per key
group would make a small checkpoint large: each row group repeats the metadata and statistics
of every column chunk. Measured (128 key groups, one LONG state, pyarrow 26): 1 row per key
group, 4.8 KiB in one row group vs 270 KiB in 128; 10 rows per key group, 11 KiB vs 282 KiB
(``test_small_keyed_state_is_one_row_group`` keeps it so).

Timers (all timer services of the subtask): ``checkpoint_id, operator_uid, operator_id,
timer_service, time_domain ("EVENT_TIME" | "PROCESSING_TIME"), key_group, timestamp (bigint,
ms), key, namespace, partition_id``; row groups by key group as keyed state. Per key group and
service, each domain's timers are in registration order.

Operator state (list, union and broadcast states of the subtask): ``checkpoint_id,
operator_uid, operator_id, state_name, mode ("SPLIT_DISTRIBUTE" | "UNION" | "BROADCAST"),
position (bigint, order within the state), key (binary: a broadcast entry's key, else null),
value (binary), partition_id``; entries are untyped (msgpack).

Channel state (the in-flight data of an unaligned checkpoint, FLIP-76; one file per subtask,
written for the head operator of its chain): ``checkpoint_id, operator_uid, operator_id,
kind ("INPUT_CHANNEL" | "RESULT_SUBPARTITION"), gate_or_partition_index (int: the input gate's
index in the task, or the output partition's), channel_or_subpartition_index (int),
position (bigint, order within that channel), data (binary), partition_id``. ``data`` is one
network buffer's records as ``rill.network.api.serialization.value_codec.pack_records`` writes
them (uncompressed: a format byte, then msgpack; ``unpack_records`` reads it back to
``(values, timestamps)``). A restore sends each subpartition's buffers first and processes
each input channel's buffers before new input, in ``position`` order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rill.common.type_conversion import TypeValueError
from rill.state.checkpoint.arrow_types import ColumnCodec, UNTYPED, column_codec, list_codec, map_codec, ttl_codec
from rill.state.checkpoint.key_group_views import NamespaceChunk
from rill.state.checkpoint.namespaces import NAMESPACE_TYPE, decode_namespaces, encode_namespace_runs, encode_namespaces
from rill.state.checkpoint.object_codec import decode_objects, encode_objects
from rill.state.checkpoint.operator_subtask_state import ChannelStateSnapshot, TimersOfKeyGroup, TimerServiceSnapshot
from rill.state.descriptors import StateDescriptor, StateType
from rill.state.key_groups import KeyGroupRange

__all__ = [
    "ROW_GROUP_TARGET_ROWS",
    "FileIdentity",
    "value_codec",
    "write_keyed_state_file",
    "read_keyed_state_file",
    "write_timers_file",
    "read_timers_file",
    "write_operator_state_file",
    "read_operator_state_file",
    "write_channel_state_file",
    "read_channel_state_file",
    "plan_row_groups",
]

#: Rows after which a keyed-state or timer row group is closed (at the next key-group boundary).
ROW_GROUP_TARGET_ROWS = 64 * 1024

#: ``[first key group, last key group, rows]`` of one row group.
RowGroupSpan = List[int]

_WRITE_OPTIONS = dict(coerce_timestamps="us", allow_truncated_timestamps=False, compression="snappy",
                      write_statistics=["key_group", "partition_id"])

#: Columns whose values are (nearly) unique per row: no dictionary encoding. Arrow would build a
#: dictionary for each column chunk and drop it once it outgrows the page; measured on a
#: 66,000-row keyed-state row group (pyarrow 26): 22 ms of CPU with dictionaries on every
#: column, 13.5 ms without them on ``key`` and ``value``, and a 13% smaller file.
_HIGH_CARDINALITY = frozenset({"key", "value", "data"})


def _dictionary_columns(schema: pa.Schema) -> List[str]:
    """The column paths of ``schema`` to dictionary-encode: all but :data:`_HIGH_CARDINALITY`
    (struct children by their dotted path, as ``use_dictionary`` names them)."""
    paths: List[str] = []

    def walk(prefix: str, field: pa.Field) -> None:
        if pa.types.is_struct(field.type):
            for child in field.type:
                walk(f"{prefix}{field.name}.", child)
        else:
            paths.append(prefix + field.name)

    for field in schema:
        if field.name not in _HIGH_CARDINALITY:
            walk("", field)
    return paths


def _write_options(schema: pa.Schema) -> Dict[str, Any]:
    return dict(_WRITE_OPTIONS, use_dictionary=_dictionary_columns(schema))


@dataclass(frozen=True)
class FileIdentity:
    """The columns every file repeats on each row: whose state it is."""

    checkpoint_id: Optional[int]
    operator_id: str
    operator_uid: Optional[str]
    subtask_index: int

    def columns(self, rows: int) -> List[Tuple[str, pa.Array]]:
        return [("checkpoint_id", _repeat(self.checkpoint_id, pa.int64(), rows)),
                ("operator_uid", _repeat(self.operator_uid, pa.string(), rows)),
                ("operator_id", _repeat(self.operator_id, pa.string(), rows))]

    def partition(self, rows: int) -> Tuple[str, pa.Array]:
        return "partition_id", _repeat(self.subtask_index, pa.int32(), rows)


def _repeat(value: Any, arrow_type: pa.DataType, rows: int) -> pa.Array:
    """``rows`` times ``value`` (Arrow repeats it: no Python list of ``rows`` elements)."""
    return pa.repeat(pa.scalar(value, arrow_type), rows)


def _repeat_runs(values: Sequence[Any], counts: Sequence[int], arrow_type: pa.DataType) -> pa.Array:
    """Each of ``values`` repeated ``counts`` times, in order (Arrow's ``take`` of numpy's
    repeated positions: Python work per run, not per row)."""
    positions = np.repeat(np.arange(len(values), dtype=np.int32), np.asarray(counts, np.int64))
    return pa.array(values, arrow_type).take(pa.array(positions))


def _identity_fields() -> List[pa.Field]:
    return [pa.field("checkpoint_id", pa.int64()), pa.field("operator_uid", pa.string()),
            pa.field("operator_id", pa.string(), nullable=False)]


def is_ttl_state(descriptor: StateDescriptor) -> bool:
    """Whether the backend stores TTL values for this descriptor (TTL on and not ``Disabled``)."""
    config = descriptor.get_ttl_config()
    return config is not None and config.is_enabled()


def value_codec(descriptor: StateDescriptor) -> ColumnCodec:
    """The codec of the stored values of the state ``descriptor`` describes (see the module
    docstring).

    :raises ValueError: if its declared type has no column type.
    """
    ttl = is_ttl_state(descriptor)
    wrap = ttl_codec if ttl else (lambda c: c)
    kind = descriptor.state_type
    if kind is StateType.LIST:
        return list_codec(wrap(column_codec(getattr(descriptor, "elem_type_info", descriptor.type_info))))
    if kind is StateType.MAP:
        return map_codec(column_codec(descriptor.key_type_info),  # type: ignore[attr-defined]
                         wrap(column_codec(descriptor.value_type_info)))  # type: ignore[attr-defined]
    return wrap(column_codec(descriptor.type_info))


def _write_row_groups(out: Any, schema: pa.Schema, runs: Iterable[Tuple[int, int, pa.Table]]) -> List[RowGroupSpan]:
    spans: List[RowGroupSpan] = []
    with pq.ParquetWriter(out, schema, **_write_options(schema)) as writer:
        for first, last, table in runs:
            writer.write_table(table, row_group_size=max(table.num_rows, 1))
            spans.append([first, last, table.num_rows])
        if not spans:
            writer.write_table(schema.empty_table())
    return spans


def _chunk_runs(key_groups: Iterable[Tuple[int, Sequence[NamespaceChunk]]], target_rows: int
                ) -> Iterable[Tuple[List[Tuple[int, int]], List[Tuple[Any, int]], List[Any], List[Any]]]:
    """Contiguous runs of whole key groups of at least ``target_rows`` rows (the last run may
    be smaller), as ``(key-group runs [(kg, rows)], namespace runs [(namespace, rows)], keys,
    values)``. Python work per key group and namespace chunk; keys and values are appended
    by ``list.extend`` (C-level)."""
    kg_runs: List[Tuple[int, int]] = []
    ns_runs: List[Tuple[Any, int]] = []
    keys: List[Any] = []
    values: List[Any] = []
    rows = 0
    for key_group, chunks in key_groups:
        before = rows
        for namespace, chunk_keys, chunk_values in chunks:
            n = len(chunk_keys)
            if n:
                keys += chunk_keys
                values += chunk_values
                ns_runs.append((namespace, n))
                rows += n
        if rows > before:
            kg_runs.append((key_group, rows - before))
        if rows >= target_rows:
            yield kg_runs, ns_runs, keys, values
            kg_runs, ns_runs, keys, values, rows = [], [], [], [], 0
    if rows:
        yield kg_runs, ns_runs, keys, values


def _keyed_schema(key: ColumnCodec, value: ColumnCodec) -> pa.Schema:
    return pa.schema(_identity_fields() + [
        pa.field("state_name", pa.string(), nullable=False),
        pa.field("key_group", pa.int32(), nullable=False),
        pa.field("key", key.arrow_type),
        pa.field("namespace", NAMESPACE_TYPE),
        pa.field("value", value.arrow_type),
        pa.field("partition_id", pa.int32(), nullable=False),
    ])


def _encode(codec: ColumnCodec, values: Sequence[Any], where: str) -> pa.Array:
    try:
        return codec.encode(values)
    except TypeValueError as e:
        raise TypeValueError(f"{where}: {e}") from e


def write_keyed_state_file(out: Any, identity: FileIdentity, descriptor: StateDescriptor,
                           key_codec: ColumnCodec,
                           key_groups: Iterable[Tuple[int, Sequence[NamespaceChunk]]],
                           where: str, row_group_target_rows: int = ROW_GROUP_TARGET_ROWS) -> List[RowGroupSpan]:
    """Write one state's entries, given as ``(key group, namespace chunks)`` in ascending
    key-group order (:mod:`~rill.state.checkpoint.key_group_views`: a pinned heap table's
    chunks, or :func:`~rill.state.checkpoint.key_group_views.entry_chunks` of entries), to the
    open binary file ``out``; returns the row groups as ``[first kg, last kg, rows]``.

    The columns are built per row group from the chunks: keys and values by one codec call
    each, every other column repeated per key group or namespace run by Arrow / numpy, so
    the Python work per entry is the codecs' alone.

    :param where: the operator and state, for errors.
    :param row_group_target_rows: rows after which a row group is closed at the next key-group
        boundary.
    :raises TypeValueError: if a key or value does not fit its declared type (the message names
        ``where``, the value and the type).
    """
    codec = value_codec(descriptor)
    schema = _keyed_schema(key_codec, codec)

    def tables() -> Iterable[Tuple[int, int, pa.Table]]:
        for kg_runs, ns_runs, keys, values in _chunk_runs(key_groups, row_group_target_rows):
            n = len(keys)
            columns = identity.columns(n) + [
                ("state_name", _repeat(descriptor.name, pa.string(), n)),
                ("key_group", _repeat_runs([kg for kg, _ in kg_runs], [c for _, c in kg_runs], pa.int32())),
                ("key", _encode(key_codec, keys, f"{where}, key")),
                ("namespace", encode_namespace_runs(ns_runs)),
                ("value", _encode(codec, values, f"{where}, value")),
                identity.partition(n),
            ]
            yield kg_runs[0][0], kg_runs[-1][0], pa.Table.from_arrays([c for _, c in columns], schema=schema)

    return _write_row_groups(out, schema, tables())


def plan_row_groups(row_groups: Sequence[RowGroupSpan], key_group_range: Optional[KeyGroupRange]) -> List[int]:
    """Indexes of the row groups holding key groups of ``key_group_range`` (all for ``None``)."""
    if key_group_range is None:
        return list(range(len(row_groups)))
    lo, hi = key_group_range.start_key_group, key_group_range.end_key_group
    return [i for i, (first, last, _) in enumerate(row_groups) if first <= hi and last >= lo]


def _read(source: Any, row_groups: Sequence[RowGroupSpan], key_group_range: Optional[KeyGroupRange],
          columns: List[str]) -> Optional[pa.Table]:
    wanted = plan_row_groups(row_groups, key_group_range)
    if not wanted:
        return None
    table = pq.ParquetFile(source).read_row_groups(wanted, columns=columns)
    if key_group_range is not None:
        kg = table.column("key_group")
        table = table.filter(pc.and_(pc.greater_equal(kg, key_group_range.start_key_group),
                                     pc.less_equal(kg, key_group_range.end_key_group)))
    return table


def read_keyed_state_file(source: Any, descriptor: StateDescriptor, key_codec: ColumnCodec,
                          row_groups: Sequence[RowGroupSpan],
                          key_group_range: Optional[KeyGroupRange]) -> Dict[int, Tuple[Tuple[Any, Any, Any], ...]]:
    """The entries of the state in the file ``source`` (an open binary file), by key group, in
    the order written; only the row groups overlapping ``key_group_range`` are read.

    :raises ValueError: if the file's values are not what the descriptor's type writes.
    """
    table = _read(source, row_groups, key_group_range, ["key_group", "key", "namespace", "value"])
    if table is None or table.num_rows == 0:
        return {}
    entries = list(zip(key_codec.decode(table.column("key")), decode_namespaces(table.column("namespace")),
                       value_codec(descriptor).decode(table.column("value"))))
    # Rows are sorted by key group: cut the entries at the runs' ends.
    runs = pc.value_counts(table.column("key_group"))
    out: Dict[int, Tuple[Tuple[Any, Any, Any], ...]] = {}
    start = 0
    for kg, count in zip(runs.field("values").to_pylist(), runs.field("counts").to_pylist()):
        out[kg] = tuple(entries[start:start + count])
        start += count
    return out


_TIME_DOMAINS = ("EVENT_TIME", "PROCESSING_TIME")


def _timer_runs(services: Mapping[str, TimerServiceSnapshot], target_rows: int
                ) -> Iterable[Tuple[List[Tuple[int, int]], List[Tuple[str, str, int]], List[Tuple[int, Any, Any]]]]:
    """The timers of every service as contiguous runs of whole key groups of at least
    ``target_rows`` rows: ``(key-group runs [(kg, rows)], label runs [(service, domain,
    rows)], timers)``; per key group, each service's event-time then processing-time timers."""
    kg_runs: List[Tuple[int, int]] = []
    label_runs: List[Tuple[str, str, int]] = []
    timers: List[Tuple[int, Any, Any]] = []
    for key_group in sorted({kg for s in services.values() for kg in s.key_groups}):
        before = len(timers)
        for name, service in services.items():
            of_key_group = service.key_groups.get(key_group)
            if of_key_group is not None:
                for domain, found in zip(_TIME_DOMAINS, (of_key_group.event_time, of_key_group.processing_time)):
                    if found:
                        timers += found
                        label_runs.append((name, domain, len(found)))
        if len(timers) > before:
            kg_runs.append((key_group, len(timers) - before))
        if len(timers) >= target_rows:
            yield kg_runs, label_runs, timers
            kg_runs, label_runs, timers = [], [], []
    if timers:
        yield kg_runs, label_runs, timers


def write_timers_file(out: Any, identity: FileIdentity, key_codec: ColumnCodec,
                      services: Mapping[str, TimerServiceSnapshot], where: str,
                      row_group_target_rows: int = ROW_GROUP_TARGET_ROWS) -> List[RowGroupSpan]:
    """Write the timers of every service to the open binary file ``out``; returns the row
    groups as :func:`write_keyed_state_file` does.

    :raises TypeValueError: if a key does not fit the declared key type.
    """
    schema = pa.schema(_identity_fields() + [
        pa.field("timer_service", pa.string(), nullable=False),
        pa.field("time_domain", pa.string(), nullable=False),
        pa.field("key_group", pa.int32(), nullable=False),
        pa.field("timestamp", pa.int64(), nullable=False),
        pa.field("key", key_codec.arrow_type),
        pa.field("namespace", NAMESPACE_TYPE),
        pa.field("partition_id", pa.int32(), nullable=False),
    ])

    def tables() -> Iterable[Tuple[int, int, pa.Table]]:
        for kg_runs, label_runs, timers in _timer_runs(services, row_group_target_rows):
            n = len(timers)
            timestamps, keys, namespaces = zip(*timers)  # C-level: the three columns of (ts, key, ns)
            counts = [c for _, _, c in label_runs]
            columns = identity.columns(n) + [
                ("timer_service", _repeat_runs([name for name, _, _ in label_runs], counts, pa.string())),
                ("time_domain", _repeat_runs([domain for _, domain, _ in label_runs], counts, pa.string())),
                ("key_group", _repeat_runs([kg for kg, _ in kg_runs], [c for _, c in kg_runs], pa.int32())),
                ("timestamp", pa.array(timestamps, pa.int64())),
                ("key", _encode(key_codec, keys, f"{where}, timer key")),
                ("namespace", encode_namespaces(namespaces)),
                identity.partition(n),
            ]
            yield kg_runs[0][0], kg_runs[-1][0], pa.Table.from_arrays([c for _, c in columns], schema=schema)

    return _write_row_groups(out, schema, tables())


def read_timers_file(source: Any, service_names: Sequence[str], key_codec: ColumnCodec,
                     row_groups: Sequence[RowGroupSpan],
                     key_group_range: Optional[KeyGroupRange]) -> Dict[str, TimerServiceSnapshot]:
    """The timer services ``service_names`` with their timers of ``key_group_range`` (all key
    groups for ``None``) from the open binary file ``source``."""
    collected: Dict[str, Dict[int, Tuple[List[Any], List[Any]]]] = {n: {} for n in service_names}
    table = _read(source, row_groups, key_group_range,
                  ["timer_service", "time_domain", "key_group", "timestamp", "key", "namespace"])
    if table is not None and table.num_rows:
        rows = zip(table.column("timer_service").to_pylist(), table.column("time_domain").to_pylist(),
                   table.column("key_group").to_pylist(), table.column("timestamp").to_pylist(),
                   key_codec.decode(table.column("key")), decode_namespaces(table.column("namespace")))
        for service, domain, kg, ts, key, ns in rows:
            lists = collected.setdefault(service, {}).setdefault(kg, ([], []))
            lists[_TIME_DOMAINS.index(domain)].append((ts, key, ns))
    return {name: TimerServiceSnapshot({kg: TimersOfKeyGroup(tuple(e), tuple(p))
                                        for kg, (e, p) in by_kg.items()})
            for name, by_kg in collected.items()}


def write_operator_state_file(out: Any, identity: FileIdentity,
                              states: Mapping[str, Tuple[str, Sequence[Any]]], where: str) -> None:
    """Write operator states ``{name: (mode, entries)}`` to the open binary file ``out``.

    :raises ValueError: if a BROADCAST entry is not a ``(key, value)`` pair.
    """
    names, modes, positions, keys, values = [], [], [], [], []
    for name, (mode, entries) in states.items():
        for i, entry in enumerate(entries):
            names.append(name)
            modes.append(mode)
            positions.append(i)
            if mode == "BROADCAST":
                if not isinstance(entry, tuple) or len(entry) != 2:
                    raise ValueError(f"{where}: broadcast state {name!r} entry {entry!r} is not a "
                                     f"(key, value) pair")
                keys.append(entry[0])
                values.append(entry[1])
            else:
                keys.append(None)
                values.append(entry)
    n = len(names)
    broadcast = [m == "BROADCAST" for m in modes]
    encoded_keys = encode_objects([k for k, b in zip(keys, broadcast) if b])
    it = iter(encoded_keys)
    schema = pa.schema(_identity_fields() + [
        pa.field("state_name", pa.string(), nullable=False),
        pa.field("mode", pa.string(), nullable=False),
        pa.field("position", pa.int64(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("partition_id", pa.int32(), nullable=False),
    ])
    columns = identity.columns(n) + [
        ("state_name", pa.array(names, pa.string())),
        ("mode", pa.array(modes, pa.string())),
        ("position", pa.array(positions, pa.int64())),
        ("key", pa.array([next(it) if b else None for b in broadcast], pa.binary())),
        ("value", pa.array(encode_objects(values), pa.binary())),
        identity.partition(n),
    ]
    pq.write_table(pa.Table.from_arrays([c for _, c in columns], schema=schema), out, **_write_options(schema))


def read_operator_state_file(source: Any, modes: Mapping[str, str]) -> Dict[str, Tuple[str, Tuple[Any, ...]]]:
    """The operator states of the open binary file ``source``; ``modes`` names every state
    (with its mode) that the snapshot had, entries or not."""
    table = pq.read_table(source, columns=["state_name", "mode", "position", "key", "value"])
    entries: Dict[str, List[Tuple[int, Any]]] = {name: [] for name in modes}
    keys = table.column("key").to_pylist()
    values = decode_objects(table.column("value").to_pylist())
    for name, mode, pos, key, value in zip(table.column("state_name").to_pylist(),
                                           table.column("mode").to_pylist(),
                                           table.column("position").to_pylist(), keys, values):
        entry = (UNTYPED.from_arrow(key), value) if mode == "BROADCAST" else value  # type: ignore[misc]
        entries.setdefault(name, []).append((pos, entry))
    return {name: (modes[name], tuple(e for _, e in sorted(found, key=lambda p: p[0])))
            for name, found in entries.items()}


_CHANNEL_KINDS = ("INPUT_CHANNEL", "RESULT_SUBPARTITION")


def write_channel_state_file(out: Any, identity: FileIdentity, state: ChannelStateSnapshot) -> None:
    """Write the in-flight data ``state`` to the open binary file ``out`` (columns: see the
    module docstring)."""
    kinds, gates, channels, positions, data = [], [], [], [], []
    for kind, entries in zip(_CHANNEL_KINDS, (state.input_channels, state.result_subpartitions)):
        seen: Dict[Tuple[int, int], int] = {}
        for gate, channel, payload in entries:
            position = seen.get((gate, channel), 0)
            seen[(gate, channel)] = position + 1
            kinds.append(kind)
            gates.append(gate)
            channels.append(channel)
            positions.append(position)
            data.append(payload)
    n = len(kinds)
    schema = pa.schema(_identity_fields() + [
        pa.field("kind", pa.string(), nullable=False),
        pa.field("gate_or_partition_index", pa.int32(), nullable=False),
        pa.field("channel_or_subpartition_index", pa.int32(), nullable=False),
        pa.field("position", pa.int64(), nullable=False),
        pa.field("data", pa.binary(), nullable=False),
        pa.field("partition_id", pa.int32(), nullable=False),
    ])
    columns = identity.columns(n) + [
        ("kind", pa.array(kinds, pa.string())),
        ("gate_or_partition_index", pa.array(gates, pa.int32())),
        ("channel_or_subpartition_index", pa.array(channels, pa.int32())),
        ("position", pa.array(positions, pa.int64())),
        ("data", pa.array(data, pa.binary())),
        identity.partition(n),
    ]
    pq.write_table(pa.Table.from_arrays([c for _, c in columns], schema=schema), out, **_write_options(schema))


def read_channel_state_file(source: Any) -> ChannelStateSnapshot:
    """The in-flight data in the open binary file ``source``, in stream order per channel."""
    table = pq.read_table(source, columns=["kind", "gate_or_partition_index", "channel_or_subpartition_index",
                                           "position", "data"])
    rows = sorted(zip(table.column("kind").to_pylist(), table.column("gate_or_partition_index").to_pylist(),
                      table.column("channel_or_subpartition_index").to_pylist(),
                      table.column("position").to_pylist(), table.column("data").to_pylist()),
                  key=lambda r: r[:4])
    by_kind: Dict[str, List[Tuple[int, int, bytes]]] = {kind: [] for kind in _CHANNEL_KINDS}
    for kind, gate, channel, _, payload in rows:
        by_kind[kind].append((gate, channel, payload))
    return ChannelStateSnapshot(by_kind["INPUT_CHANNEL"], by_kind["RESULT_SUBPARTITION"])
