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

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rill.common.type_conversion import TypeValueError
from rill.state.checkpoint.arrow_types import ColumnCodec, UNTYPED, column_codec, list_codec, map_codec, ttl_codec
from rill.state.checkpoint.namespaces import NAMESPACE_TYPE, decode_namespaces, encode_namespaces
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


@dataclass(frozen=True)
class FileIdentity:
    """The columns every file repeats on each row: whose state it is."""

    checkpoint_id: Optional[int]
    operator_id: str
    operator_uid: Optional[str]
    subtask_index: int

    def columns(self, rows: int) -> List[Tuple[str, pa.Array]]:
        return [("checkpoint_id", pa.array([self.checkpoint_id] * rows, pa.int64())),
                ("operator_uid", pa.array([self.operator_uid] * rows, pa.string())),
                ("operator_id", pa.array([self.operator_id] * rows, pa.string()))]

    def partition(self, rows: int) -> Tuple[str, pa.Array]:
        return "partition_id", pa.array([self.subtask_index] * rows, pa.int32())


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
    with pq.ParquetWriter(out, schema, **_WRITE_OPTIONS) as writer:
        for first, last, table in runs:
            writer.write_table(table, row_group_size=max(table.num_rows, 1))
            spans.append([first, last, table.num_rows])
        if not spans:
            writer.write_table(schema.empty_table())
    return spans


def _runs_by_key_group(per_key_group: Iterable[Tuple[int, Sequence[Any]]],
                       target_rows: int) -> Iterable[Tuple[int, int, List[int], List[Any]]]:
    """Contiguous runs of whole key groups of at least ``target_rows`` rows (the last run may
    be smaller), as ``(first kg, last kg, key group of each row, rows)``."""
    first = last = -1
    kgs: List[int] = []
    rows: List[Any] = []
    for key_group, entries in per_key_group:
        if not rows:
            first = key_group
        rows.extend(entries)
        kgs.extend([key_group] * len(entries))
        last = key_group
        if len(rows) >= target_rows:
            yield first, last, kgs, rows
            kgs, rows = [], []
    if rows:
        yield first, last, kgs, rows


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
                           key_groups: Iterable[Tuple[int, Sequence[Tuple[Any, Any, Any]]]],
                           where: str, row_group_target_rows: int = ROW_GROUP_TARGET_ROWS) -> List[RowGroupSpan]:
    """Write one state's entries, given as ``(key group, entries)`` in ascending key-group order,
    to the open binary file ``out``; returns the row groups as ``[first kg, last kg, rows]``.

    :param where: the operator and state, for errors.
    :param row_group_target_rows: rows after which a row group is closed at the next key-group
        boundary.
    :raises TypeValueError: if a key or value does not fit its declared type (the message names
        ``where``, the value and the type).
    """
    codec = value_codec(descriptor)
    schema = _keyed_schema(key_codec, codec)

    def tables() -> Iterable[Tuple[int, int, pa.Table]]:
        for first, last, kgs, rows in _runs_by_key_group(key_groups, row_group_target_rows):
            n = len(rows)
            columns = identity.columns(n) + [
                ("state_name", pa.array([descriptor.name] * n, pa.string())),
                ("key_group", pa.array(kgs, pa.int32())),
                ("key", _encode(key_codec, [e[0] for e in rows], f"{where}, key")),
                ("namespace", encode_namespaces([e[1] for e in rows])),
                ("value", _encode(codec, [e[2] for e in rows], f"{where}, value")),
                identity.partition(n),
            ]
            yield first, last, pa.Table.from_arrays([c for _, c in columns], schema=schema)

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
    all_key_groups = sorted({kg for s in services.values() for kg in s.key_groups})

    def per_key_group() -> Iterable[Tuple[int, List[Tuple[str, str, Tuple[int, Any, Any]]]]]:
        for kg in all_key_groups:
            rows = []
            for name, service in services.items():
                timers = service.key_groups.get(kg)
                if timers is not None:
                    rows.extend((name, "EVENT_TIME", t) for t in timers.event_time)
                    rows.extend((name, "PROCESSING_TIME", t) for t in timers.processing_time)
            yield kg, rows

    def tables() -> Iterable[Tuple[int, int, pa.Table]]:
        for first, last, kgs, rows in _runs_by_key_group(per_key_group(), row_group_target_rows):
            n = len(rows)
            columns = identity.columns(n) + [
                ("timer_service", pa.array([r[0] for r in rows], pa.string())),
                ("time_domain", pa.array([r[1] for r in rows], pa.string())),
                ("key_group", pa.array(kgs, pa.int32())),
                ("timestamp", pa.array([r[2][0] for r in rows], pa.int64())),
                ("key", _encode(key_codec, [r[2][1] for r in rows], f"{where}, timer key")),
                ("namespace", encode_namespaces([r[2][2] for r in rows])),
                identity.partition(n),
            ]
            yield first, last, pa.Table.from_arrays([c for _, c in columns], schema=schema)

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
    pq.write_table(pa.Table.from_arrays([c for _, c in columns], schema=schema), out, **_WRITE_OPTIONS)


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
    pq.write_table(pa.Table.from_arrays([c for _, c in columns], schema=schema), out, **_WRITE_OPTIONS)


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
