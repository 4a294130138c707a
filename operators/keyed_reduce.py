"""``StreamGroupedReduce``: the rolling reduce of a keyed stream (Flink's
``org.apache.flink.streaming.api.operators.StreamGroupedReduce``; PyFlink's operator name
``"Reduce"``), also behind ``KeyedStream.sum/min/max/min_by/max_by``
(see :mod:`rill.operators.aggregations`).
"""

from __future__ import annotations

from typing import Any, List, Optional

from rill.common.functions import is_rich
from rill.operators.base import AbstractUdfStreamOperator
from rill.state.api import VOID_NAMESPACE
from rill.state.descriptors import ValueStateDescriptor

__all__ = ["StreamGroupedReduce"]


class StreamGroupedReduce(AbstractUdfStreamOperator):
    """Keeps one value per key in a ``ValueState`` named ``"_op_state"`` and emits every
    updated value (Flink's ``StreamGroupedReduce``): the first record of a key is stored and
    emitted as it is; each later one is combined as ``reduce(stored, record)``, stored and
    emitted. Output records keep their input timestamps. Watermarks are forwarded.

    Fast path: ``process_batch`` reads and writes the state's ``StateTable.key_group_maps``
    directly (the layout of :mod:`rill.state.state_table`), finding each key's group through
    the backend's key-group cache; per record that is the key selector call, the cache look-up,
    two dict look-ups, the reduce call, a dict store and an append. ``process_element`` is the
    same code on a batch of one. For a *rich* reduce function (one that overrides ``open``, so
    it may read keyed state through its runtime context) the backend's current key is also set
    for every record, as Flink does.

    As Flink, a reduce result of ``None`` clears the key's state (the next record of the key
    starts afresh); ``None`` is emitted.

    :param user_function: a ``ReduceFunction`` (``reduce(value1, value2) -> value``, where
        ``value1`` is the stored value).
    :param type_info: type information of the values, recorded on the state descriptor.
    :raises RuntimeError: at ``open`` if the operator is not on a keyed stream.
    :raises UnsupportedKeyError: (a ``TypeError``) for a key without a stable hash.
    :raises ValueError: for a key whose key group is not in the subtask's range.
    """

    default_name = "Reduce"
    STATE_NAME = "_op_state"

    def __init__(self, user_function: Any, type_info: Any = None) -> None:
        super().__init__(user_function)
        self.type_info = type_info

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
        self._maps = self._state.table.key_group_maps
        selector = context.key_selector
        self._key_of = getattr(selector, "get_key", selector)
        self._reduce = self.user_function.reduce
        # The backend's key -> key-group-offset cache, read directly on the fast path (the
        # mapping is a pure function of the key, so a stale dict could only miss, never lie);
        # misses go through compute_key_group_offset, which fills it.
        self._key_group_cache = backend.key_group_cache
        self._sets_key = is_rich(self.user_function)

    def process_element(self, value: Any, timestamp: Optional[int] = None) -> None:
        self.process_batch([value], None if timestamp is None else [timestamp])

    def process_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        maps = self._maps
        ns = VOID_NAMESPACE
        reduce = self._reduce
        key_of = self._key_of
        key_group_offset = self._backend.compute_key_group_offset
        cache = self._key_group_cache
        set_key = self._backend.set_current_key if self._sets_key else None
        out: List[Any] = []
        append = out.append
        try:
            for value in values:
                key = key_of(value)
                if set_key is not None:
                    set_key(key)
                try:
                    by_namespace = maps[cache[key]]
                except (KeyError, TypeError):  # not cached (or unhashable: the backend raises)
                    by_namespace = maps[key_group_offset(key)]
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
        finally:
            if out:
                if timestamps is not None and len(timestamps) != len(out):
                    timestamps = timestamps[: len(out)]  # an error stopped the batch
                self.output.collect_batch(out, timestamps)
