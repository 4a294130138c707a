"""``BatchGroupedReduceOperator``: ``KeyedStream.reduce`` (and ``sum``/``min``/``max``/
``min_by``/``max_by``) in BATCH mode, emitting one final record per key (Flink's
``org.apache.flink.streaming.api.operators.BatchGroupedReduceOperator``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from rill.common.functions import is_rich
from rill.common.streamrecord import MAX_TIMESTAMP, MAX_WATERMARK
from rill.operators.base import AbstractUdfStreamOperator

__all__ = ["BatchGroupedReduceOperator"]


class BatchGroupedReduceOperator(AbstractUdfStreamOperator):
    """Reduces each key's records to one value and emits every key's value once, at the end of
    input, with timestamp ``MAX_TIMESTAMP`` (as Flink's, which emits them from a timer at the
    end of time). No incremental results.

    Unlike the other keyed operators in BATCH mode, it needs no grouping of its input: one
    running value per key in a dict is the same result in O(keys) memory, so the input is
    reduced as it arrives (per record: the key selector, a dict look-up, the reduce call, a
    dict store). A *rich* reduce function (one that overrides ``open``, so it may read keyed
    state) gets the backend's current key set for every record, as in STREAMING. As Flink, a
    reduce result of ``None`` clears the key (its next record starts afresh; nothing is emitted
    for a key whose value is ``None`` at the end).

    :param user_function: a ``ReduceFunction`` (``reduce(value1, value2) -> value``, where
        ``value1`` is the key's value so far).
    :param type_info: type information of the values (kept for the plan; no state is written).
    :raises RuntimeError: at ``open`` if the operator is not on a keyed stream.
    """

    default_name = "Reduce"

    def __init__(self, user_function: Any, type_info: Any = None) -> None:
        super().__init__(user_function)
        self.type_info = type_info

    def open(self) -> None:
        context = self.context
        if context.keyed_state_backend is None or context.key_selector is None:
            raise RuntimeError(
                f"Operator '{context.operator_name}' ({type(self).__name__}) needs a keyed stream: "
                "key_by() must come before reduce()"
            )
        super().open()
        selector = context.key_selector
        self._key_of = getattr(selector, "get_key", selector)
        self._reduce = self.user_function.reduce
        self._set_key = context.keyed_state_backend.set_current_key if is_rich(self.user_function) else None
        self._values: Dict[Any, Any] = {}

    def process_element(self, value: Any, timestamp: Optional[int] = None) -> None:
        self.process_batch([value], None if timestamp is None else [timestamp])

    def process_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        acc = self._values
        get = acc.get
        key_of = self._key_of
        reduce = self._reduce
        set_key = self._set_key
        for value in values:
            key = key_of(value)
            if set_key is not None:
                set_key(key)
            current = get(key)
            if current is not None:
                value = reduce(current, value)
            if value is None:
                acc.pop(key, None)
            else:
                acc[key] = value

    def process_watermark(self, watermark) -> None:
        """Swallowed: a BATCH input's only watermark is the final ``MAX_WATERMARK``, which
        :meth:`end_input` emits after the results (so no result is late downstream)."""

    def end_input(self) -> None:
        """Emit each key's value, in batches of the task's ``records_per_batch``, then
        ``MAX_WATERMARK``."""
        values = list(self._values.values())
        self._values = {}
        step = max(1, self.context.records_per_batch)
        for i in range(0, len(values), step):
            chunk = values[i:i + step]
            self.output.collect_batch(chunk, [MAX_TIMESTAMP] * len(chunk))
        self.output.emit_watermark(MAX_WATERMARK)
