"""``StreamGroupedReduce``: the rolling reduce of a keyed stream (Flink's
``org.apache.flink.streaming.api.operators.StreamGroupedReduce``; PyFlink's operator name
``"Reduce"``), also behind ``KeyedStream.sum/min/max/min_by/max_by``
(see :mod:`rill.operators.aggregations` and :mod:`rill.operators.batch_aggregations`).
"""

from __future__ import annotations

from itertools import repeat
from operator import sub
from typing import Any, Hashable, List, Optional, Tuple

from rill.common.functions import is_rich
from rill.network.partitioner.keyed_batch import KeyedBatch
from rill.operators.base import AbstractUdfStreamOperator
from rill.operators.batch_aggregations import tuple_aggregation_for
from rill.operators.field_key_selector import FieldKeySelector
from rill.state.api import VOID_NAMESPACE
from rill.state.descriptors import ValueStateDescriptor

__all__ = ["StreamGroupedReduce"]

#: batches after a snapshot that copy the pinned key groups they touch, before the rest is
#: copied at once (see StreamGroupedReduce._resolve_pinned)
_PINNED_BATCHES = 16


class StreamGroupedReduce(AbstractUdfStreamOperator):
    """Keeps one value per key in a ``ValueState`` named ``"_op_state"`` and emits every
    updated value (Flink's ``StreamGroupedReduce``): the first record of a key is stored and
    emitted as it is; each later one is combined as ``reduce(stored, record)``, stored and
    emitted. Output records keep their input timestamps. Watermarks are forwarded.

    Fast path, per batch: the keys and key groups are those the ``key_by`` exchange computed
    when they came with the batch (a :class:`~rill.network.partitioner.keyed_batch.KeyedBatch`
    with this operator's ``key_token``: inside a process), else the keys are
    ``map(key_selector, values)`` (C-level for ``operator.itemgetter``, or the selector's own
    ``get_keys`` batch method) and their key groups come from the backend's key-group cache
    through ``map``; then one loop reads and writes the
    state's ``StateTable.key_group_maps`` directly (the layout of :mod:`rill.state.state_table`).
    Per record that is two dict look-ups, the combination, a dict store and an append; the
    combination is inline for the built-in aggregations on tuples
    (:mod:`rill.operators.batch_aggregations`) and a call of ``reduce`` otherwise.
    ``process_element`` is the same code on a batch of one. For a *rich* reduce function (one
    that overrides ``open``, so it may read keyed state through its runtime context) the
    backend's current key is also set for every record, as Flink does.

    As Flink, a reduce result of ``None`` clears the key's state (the next record of the key
    starts afresh); ``None`` is emitted.

    :param user_function: a ``ReduceFunction`` (``reduce(value1, value2) -> value``, where
        ``value1`` is the stored value).
    :param type_info: type information of the values, recorded on the state descriptor.
    :param key_token: the token of the ``key_by`` exchange feeding this operator (set by
        ``KeyedStream``); batches carrying keys under another token (or none) are keyed again.
    :raises RuntimeError: at ``open`` if the operator is not on a keyed stream.
    :raises UnsupportedKeyError: (a ``TypeError``) for a key without a stable hash.
    :raises ValueError: for a key whose key group is not in the subtask's range.
    """

    default_name = "Reduce"
    STATE_NAME = "_op_state"

    def __init__(self, user_function: Any, type_info: Any = None, key_token: Hashable = None) -> None:
        super().__init__(user_function)
        self.type_info = type_info
        self.key_token = key_token

    def open(self) -> None:
        context = self.context
        backend = context.keyed_state_backend
        if backend is None or context.key_selector is None:
            raise RuntimeError(
                f"Operator '{context.operator_name}' ({type(self).__name__}) needs a keyed stream: "
                "key_by() must come before reduce()"
            )
        super().open()
        self._backend = backend
        self._state = backend.get_or_create_keyed_state(ValueStateDescriptor(self.STATE_NAME, self.type_info))
        # the heap backend's tables, written directly below; other backends (RocksDB) have none
        # and take the per-record path through the state object
        self._table = getattr(self._state, "table", None)
        self._maps = None if self._table is None else self._table.key_group_maps
        #: the table's ``pins`` when no key group was pinned any more, and the batches since
        #: (see _resolve_pinned)
        self._unpinned_at = None if self._table is None else self._table.pins
        self._pinned_batches = 0
        selector = context.key_selector
        self._key_of = getattr(selector, "get_key", selector)
        # key_by(position/name): the selector keys whole batches (state_key_selector is its get_key)
        owner = getattr(selector, "__self__", selector)
        self._keys_of = owner.get_keys if isinstance(owner, FieldKeySelector) else None
        self._reduce = self.user_function.reduce
        # The backend's key -> key-group-offset cache, read directly on the fast path (the
        # mapping is a pure function of the key, so a stale dict could only miss, never lie);
        # misses go through compute_key_group_offset, which fills it.
        self._key_group_cache = None if self._table is None else backend.key_group_cache
        key_group_range = backend.key_group_range
        self._first_key_group = key_group_range.start_key_group
        self._num_key_groups = key_group_range.get_number_of_key_groups()
        self._sets_key = is_rich(self.user_function)
        self._aggregation = None if self._sets_key else tuple_aggregation_for(self.user_function)
        if self._maps is None:
            self._aggregation = None
        elif self._aggregation is not None:
            self._aggregation.start(not any(self._maps))

    def process_element(self, value: Any, timestamp: Optional[int] = None) -> None:
        self.process_batch([value], None if timestamp is None else [timestamp])

    def _keys(self, values: List[Any]) -> Tuple[List[Any], Optional[List[int]]]:
        """``(keys, key_groups)``: those the exchange computed when the batch carries them under
        this operator's token (``key_groups`` may still be ``None``), else the keys computed
        here and ``None``."""
        if values.__class__ is KeyedBatch and values.key_token == self.key_token and self.key_token is not None:
            return values.keys, values.key_groups
        keys_of = self._keys_of
        return (keys_of(values) if keys_of is not None else list(map(self._key_of, values))), None

    def _offsets_of(self, key_groups: List[int]) -> Optional[List[int]]:
        """The exchange's key groups as offsets into ``key_group_maps``, or ``None`` if one is
        outside this subtask's range (the backend then raises its error for that key)."""
        start = self._first_key_group
        if min(key_groups) < start or max(key_groups) >= start + self._num_key_groups:
            return None
        return key_groups if start == 0 else list(map(sub, key_groups, repeat(start)))

    def _by_namespaces(self, keys: List[Any], key_groups: Optional[List[int]] = None) -> List[dict]:
        """Per key, its key group's ``namespace -> {key: value}`` map: from the key groups the
        exchange computed when given, else through a C-level ``map`` over the backend's
        key-group cache (misses, found with C-level ``index``, go to the backend)."""
        offsets = None if key_groups is None else self._offsets_of(key_groups)
        if offsets is None:
            try:
                offsets = list(map(self._key_group_cache.get, keys))
            except TypeError:  # an unhashable key: the backend raises its error for it
                offsets = [None] * len(keys)
        if None in offsets:
            key_group_offset = self._backend.compute_key_group_offset
            index = offsets.index
            i = index(None)
            while True:
                offsets[i] = key_group_offset(keys[i])
                try:
                    i = index(None, i + 1)
                except ValueError:
                    break
        by_namespaces = list(map(self._maps.__getitem__, offsets))
        if self._table.pins != self._unpinned_at:
            by_namespaces = self._resolve_pinned(by_namespaces)
        return by_namespaces

    def _resolve_pinned(self, by_namespaces: List[Any]) -> List[dict]:
        """After a snapshot: the batch's pinned key groups copied into their slots (see
        :mod:`rill.state.copy_on_write`), so the loops get plain dicts (``dict.get`` unbound),
        spreading the copies over the batches that touch them. Key groups that
        :data:`_PINNED_BATCHES` batches did not touch are copied then, so that later batches
        skip this until the next snapshot."""
        table = self._table
        self._pinned_batches += 1
        if self._pinned_batches >= _PINNED_BATCHES:
            table.unpin()
        by_namespaces = [m if m.__class__ is dict else m.live() for m in by_namespaces]
        if not table.has_pinned():
            self._unpinned_at = table.pins
            self._pinned_batches = 0
        return by_namespaces

    def process_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        if not values:
            return
        keys, key_groups = self._keys(values)
        out: List[Any] = []
        if self._maps is None:
            try:
                self._reduce_through_state(values, keys, out.append)
            finally:
                if out:
                    self.output.collect_batch(out, timestamps if timestamps is None or len(timestamps) == len(out)
                                              else timestamps[: len(out)])
            return
        try:
            by_namespaces = self._by_namespaces(keys, key_groups)
            aggregation = self._aggregation
            if aggregation is not None and aggregation.accepts(values):
                if not aggregation.run(values, keys, by_namespaces, out.append):
                    done = len(out)
                    self._reduce_batch(values[done:], keys[done:], by_namespaces[done:], out.append)
            else:
                self._reduce_batch(values, keys, by_namespaces, out.append)
        finally:
            if out:
                if timestamps is not None and len(timestamps) != len(out):
                    timestamps = timestamps[: len(out)]  # an error stopped the batch
                self.output.collect_batch(out, timestamps)

    def _reduce_through_state(self, values: List[Any], keys: List[Any], append) -> None:
        """The path of backends without heap tables. A state with per-batch access
        (``get_values``/``put_values``, the RocksDB backend's) is read once for the batch's
        keys and written once with what the records before an error left; a rich reduce
        function, or another state, goes per record: the key set, the value read, reduced and
        written through the state object."""
        state = self._state
        reduce = self._reduce
        get_values = getattr(state, "get_values", None)
        if get_values is not None and not self._sets_key:
            stored = get_values(keys)
            changed = {}
            try:
                for value, key in zip(values, keys):
                    current = stored[key]
                    if current is not None:
                        value = reduce(current, value)
                    stored[key] = changed[key] = value
                    append(value)
            finally:
                state.put_values(changed)
            return
        set_key = self._backend.set_current_key
        for value, key in zip(values, keys):
            set_key(key)
            current = state.value()
            if current is not None:
                value = reduce(current, value)
            state.update(value)
            append(value)

    def _reduce_batch(self, values: List[Any], keys: List[Any], by_namespaces: List[dict], append) -> None:
        ns = VOID_NAMESPACE
        reduce = self._reduce
        set_key = self._backend.set_current_key if self._sets_key else None
        for value, key, by_namespace in zip(values, keys, by_namespaces):
            if set_key is not None:
                set_key(key)
            by_key = by_namespace.get(ns)
            if by_key is not None:
                current = by_key.get(key)
                if current is not None:
                    value = reduce(current, value)
                if value is not None:
                    by_key[key] = value
                elif current is not None:
                    del by_key[key]
                    if not by_key:
                        del by_namespace[ns]
            elif value is not None:
                by_namespace[ns] = {key: value}
            append(value)
