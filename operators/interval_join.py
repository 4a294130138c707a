"""``IntervalJoinOperator``: the event-time interval join of two keyed streams (Flink's
``org.apache.flink.streaming.api.operators.co.IntervalJoinOperator``; operator name
``"Interval Join"``).

A left element at ``t`` joins every right element of the same key at ``t_r`` with
``t + lower_bound <= t_r <= t + upper_bound`` (bounds inclusive unless made exclusive, which
moves them one ms inwards). How it works, as Flink:

- each side is buffered in keyed ``MapState`` (``"LEFT_BUFFER"``, ``"RIGHT_BUFFER"``): event
  timestamp (ms) → list of the elements with that timestamp;
- an arriving element is added to its side's buffer, then joined with every buffered element of
  the other side whose timestamp lies in its relative interval (``[t + lower, t + upper]`` for a
  left element, ``[t - upper, t - lower]`` for a right one), so every pair is emitted exactly
  once, by whichever of the two arrives second;
- each output is what ``ProcessJoinFunction.process_element(left, right, ctx)`` yields, with
  timestamp ``max(t_left, t_right)``; ``ctx.get_left_timestamp()``,
  ``get_right_timestamp()``, ``get_timestamp()`` give the three; ``(OutputTag, value)``
  goes to a side output (same timestamp);
- a cleanup timer per element (timer service ``"CLEANUP_TIMER"``, namespaces
  ``"CLEANUP_LEFT"``/``"CLEANUP_RIGHT"``) removes its timestamp's bucket once the combined
  watermark of both inputs reaches the last time the element could still join:
  ``t + upper`` for a left element (``t`` if ``upper <= 0``), ``t - lower`` for a right one
  (``t`` if ``lower >= 0``);
- an element whose timestamp is behind the operator's watermark (``t < watermark``) is late: it
  is neither buffered nor joined; it goes to the left/right late-data side output when one is
  set (Flink 1.17's ``sideOutputLeftLateData``/``sideOutputRightLateData``), else it is dropped.

The join needs event time: an element without timestamp raises ``ValueError`` naming the
operator, the side and the value (Flink raises on ``Long.MIN_VALUE`` timestamps).

Rill difference, for speed: Flink probes by iterating every buffered timestamp of the other
side's key, so a probe costs O(buffered timestamps) and an input that runs ahead of the other
(its whole history buffered while the watermark waits) makes the join quadratic. Rill keeps,
next to each side's ``MapState``, a per-key sorted list of its buffered timestamps (its
*index*, not state: it is rebuilt from the ``MapState`` for a key the operator has not seen
since ``open``, e.g. after a restore), found with ``bisect``: a probe costs
O(log n + matches), a cleanup O(log n + the key's buckets moved). Outputs are the same pairs;
within one arriving element they come in timestamp order of the other side's buckets and,
within a bucket, in arrival order (Flink: the state backend's map order).
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right, insort
from typing import Any, Dict, List, Optional

from rill.common.time import to_milliseconds  # noqa: F401 - re-exported: the join API converts bounds with it
from rill.common.co_functions import ProcessJoinFunction
from rill.operators.co_operators import AbstractUdfTwoInputStreamOperator
from rill.operators.output_tag import OutputTag
from rill.operators.timer_service import InternalTimer, Triggerable
from rill.state.descriptors import MapStateDescriptor

__all__ = ["IntervalJoinOperator", "to_milliseconds"]

log = logging.getLogger(__name__)




class _JoinContext(ProcessJoinFunction.Context):
    __slots__ = ("_left", "_right", "_result")

    def __init__(self) -> None:
        self._left = self._right = self._result = 0

    def get_left_timestamp(self) -> int:
        """The left element's timestamp, ms."""
        return self._left

    def get_right_timestamp(self) -> int:
        """The right element's timestamp, ms."""
        return self._right

    def get_timestamp(self) -> int:
        """The output's timestamp, ``max(left, right)``, ms."""
        return self._result


class IntervalJoinOperator(AbstractUdfTwoInputStreamOperator, Triggerable):
    """Joins two keyed streams on intervals of event time (see the module docstring).

    :param lower_bound: ms (may be negative), relative to the left element's timestamp.
    :param upper_bound: ms, ``>= lower_bound``.
    :param lower_bound_inclusive: whether ``t_r == t + lower_bound`` joins (default ``True``).
    :param upper_bound_inclusive: whether ``t_r == t + upper_bound`` joins (default ``True``).
    :param user_function: a ``ProcessJoinFunction``.
    :param left_late_data_output_tag: where late left elements go (default: dropped).
    :param right_late_data_output_tag: where late right elements go (default: dropped).
    :raises TypeError: if a bound is not an int or the function is not a ``ProcessJoinFunction``.
    :raises ValueError: if ``lower_bound > upper_bound`` (Flink's message).
    :raises RuntimeError: at ``open``, naming the operator, if the inputs are not keyed.
    """

    default_name = "Interval Join"
    LEFT_BUFFER = "LEFT_BUFFER"
    RIGHT_BUFFER = "RIGHT_BUFFER"
    CLEANUP_TIMER_NAME = "CLEANUP_TIMER"
    CLEANUP_NAMESPACE_LEFT = "CLEANUP_LEFT"
    CLEANUP_NAMESPACE_RIGHT = "CLEANUP_RIGHT"

    def __init__(
        self,
        lower_bound: int,
        upper_bound: int,
        lower_bound_inclusive: bool,
        upper_bound_inclusive: bool,
        user_function: ProcessJoinFunction,
        left_late_data_output_tag: Optional[OutputTag] = None,
        right_late_data_output_tag: Optional[OutputTag] = None,
    ) -> None:
        if not isinstance(user_function, ProcessJoinFunction):
            raise TypeError(
                f"IntervalJoinOperator expects a ProcessJoinFunction, got {user_function!r} of type "
                f"{type(user_function).__name__}"
            )
        super().__init__(user_function)
        for name, bound in (("lower_bound", lower_bound), ("upper_bound", upper_bound)):
            if not isinstance(bound, int) or isinstance(bound, bool):
                raise TypeError(f"IntervalJoinOperator: {name} must be an int (ms), got {bound!r}")
        if lower_bound > upper_bound:
            raise ValueError(
                f"lowerBound <= upperBound must be fulfilled, got lower bound {lower_bound} ms and "
                f"upper bound {upper_bound} ms"
            )
        for tag in (left_late_data_output_tag, right_late_data_output_tag):
            if tag is not None and not isinstance(tag, OutputTag):
                raise TypeError(f"IntervalJoinOperator: a late data output tag must be an OutputTag, got {tag!r}")
        #: effective inclusive bounds, ms (exclusive bounds moved one ms inwards, as Flink)
        self.lower_bound = lower_bound if lower_bound_inclusive else lower_bound + 1
        self.upper_bound = upper_bound if upper_bound_inclusive else upper_bound - 1
        self.left_late_data_output_tag = left_late_data_output_tag
        self.right_late_data_output_tag = right_late_data_output_tag

    def open(self) -> None:
        self._require_keyed("ProcessJoinFunction (interval join)")
        context = self.context
        backend = context.keyed_state_backend
        self._set_key = backend.set_current_key
        self._key_of1 = getattr(context.key_selector, "get_key", context.key_selector)
        self._key_of2 = getattr(context.key_selector2, "get_key", context.key_selector2)
        self._left_buffer = backend.get_or_create_keyed_state(MapStateDescriptor(self.LEFT_BUFFER))
        self._right_buffer = backend.get_or_create_keyed_state(MapStateDescriptor(self.RIGHT_BUFFER))
        self._timers = context.timer_service_manager.get_internal_timer_service(self.CLEANUP_TIMER_NAME, self)
        #: per side, key -> sorted buffered timestamps of that key (derived from the buffers)
        self._left_index: Dict[Any, List[int]] = {}
        self._right_index: Dict[Any, List[int]] = {}
        #: buffered (key, timestamp) buckets per side now, and the most there ever were
        self.buffered_buckets = [0, 0]
        self.peak_buffered_buckets = [0, 0]
        self._get_key = backend.get_current_key
        self._ctx = _JoinContext()
        self._join = self.user_function.process_element
        super().open()

    @staticmethod
    def _timestamps(index: Dict[Any, List[int]], buffer: Any, key: Any) -> List[int]:
        """The current key's sorted buffered timestamps of one side (built from ``buffer``, the
        side's ``MapState`` bound to that key, the first time the key is seen)."""
        timestamps = index.get(key)
        if timestamps is None:
            timestamps = index[key] = sorted(buffer.keys())
        return timestamps

    # -- input --------------------------------------------------------------------------------
    def process_batch1(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        self._process_batch(values, timestamps, True)

    def process_batch2(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        self._process_batch(values, timestamps, False)

    def _process_batch(self, values: List[Any], timestamps: Optional[List[int]], is_left: bool) -> None:
        if is_left:
            key_of, ours, other = self._key_of1, self._left_buffer, self._right_buffer
            our_index, other_index = self._left_index, self._right_index
            rel_lower, rel_upper = self.lower_bound, self.upper_bound
            namespace, late_tag = self.CLEANUP_NAMESPACE_LEFT, self.left_late_data_output_tag
        else:
            key_of, ours, other = self._key_of2, self._right_buffer, self._left_buffer
            our_index, other_index = self._right_index, self._left_index
            rel_lower, rel_upper = -self.upper_bound, -self.lower_bound
            namespace, late_tag = self.CLEANUP_NAMESPACE_RIGHT, self.right_late_data_output_tag
        set_key = self._set_key
        timestamps_of = self._timestamps
        timers = self._timers
        out: List[Any] = []
        out_ts: List[int] = []
        try:
            for i, value in enumerate(values):
                t = None if timestamps is None else timestamps[i]
                if t is None:
                    self._missing_timestamp(value, is_left)
                if t < timers.current_watermark():  # late (MIN_TIMESTAMP before any watermark)
                    if late_tag is not None:
                        self.output.collect_side(late_tag, value, t)
                    continue
                key = key_of(value)
                set_key(key)
                bucket = ours.get(t)
                if bucket is None:
                    ours_ts = timestamps_of(our_index, ours, key)
                    ours.put(t, [value])
                    insort(ours_ts, t)
                    self._count_bucket(0 if is_left else 1, 1)
                else:
                    bucket.append(value)
                    ours.put(t, bucket)
                other_ts = timestamps_of(other_index, other, key)
                low, high = t + rel_lower, t + rel_upper
                for other_t in other_ts[bisect_left(other_ts, low):bisect_right(other_ts, high)]:
                    for element in other.get(other_t):
                        if is_left:
                            self._collect(value, element, t, other_t, out, out_ts)
                        else:
                            self._collect(element, value, other_t, t, out, out_ts)
                timers.register_event_time_timer(namespace, t + rel_upper if rel_upper > 0 else t)
        finally:
            if out:
                self.output.collect_batch(out, out_ts)

    def _collect(self, left: Any, right: Any, left_ts: int, right_ts: int, out: List[Any], out_ts: List[int]) -> None:
        result_ts = left_ts if left_ts > right_ts else right_ts
        ctx = self._ctx
        ctx._left, ctx._right, ctx._result = left_ts, right_ts, result_ts
        result = self._join(left, right, ctx)
        if result is None:
            return
        for item in result:
            if item.__class__ is tuple and len(item) == 2 and isinstance(item[0], OutputTag):
                self.output.collect_side(item[0], item[1], result_ts)
            else:
                out.append(item)
                out_ts.append(result_ts)

    def _missing_timestamp(self, value: Any, is_left: bool) -> None:
        side = "left (first)" if is_left else "right (second)"
        raise ValueError(
            f"Operator '{self.context.operator_name}' (interval join): the {side} input's element "
            f"{value!r} has no timestamp. Elements of an interval join need event-time timestamps: "
            "assign them with assign_timestamps_and_watermarks() or a source WatermarkStrategy"
        )

    # -- cleanup ------------------------------------------------------------------------------
    def on_event_time(self, timer: InternalTimer) -> None:
        """Drop the bucket whose elements can no longer join (the timer's key is current)."""
        t = timer.timestamp
        if timer.namespace == self.CLEANUP_NAMESPACE_LEFT:
            self._remove_bucket(0, self._left_index, self._left_buffer,
                                t if self.upper_bound <= 0 else t - self.upper_bound)
        elif timer.namespace == self.CLEANUP_NAMESPACE_RIGHT:
            self._remove_bucket(1, self._right_index, self._right_buffer,
                                t + self.lower_bound if self.lower_bound <= 0 else t)
        else:  # pragma: no cover - only the two namespaces are ever registered
            raise RuntimeError(f"Invalid namespace {timer.namespace!r} of interval join cleanup timer")

    def _remove_bucket(self, side: int, index: Dict[Any, List[int]], buffer: Any, t: int) -> None:
        """Drop the current key's bucket ``t`` from a side's buffer and from its index (a key
        whose last bucket goes leaves the index too)."""
        key = self._get_key()
        timestamps = self._timestamps(index, buffer, key)
        buffer.remove(t)
        i = bisect_left(timestamps, t)
        if i < len(timestamps) and timestamps[i] == t:  # several timers may name one bucket
            del timestamps[i]
            self._count_bucket(side, -1)
        if not timestamps:
            del index[key]

    def _count_bucket(self, side: int, delta: int) -> None:
        n = self.buffered_buckets[side] = self.buffered_buckets[side] + delta
        if n > self.peak_buffered_buckets[side]:
            self.peak_buffered_buckets[side] = n

    def close(self) -> None:
        """Logs (DEBUG, logger ``rill.operators.interval_join``) the most (key, timestamp)
        buckets each side ever buffered in this subtask: how large the join's state grew,
        which watermark alignment bounds (``bench.interval_join`` reads it)."""
        if hasattr(self, "peak_buffered_buckets"):
            log.debug("%s: peak buffered buckets left=%d right=%d", self.context.task_name,
                      *self.peak_buffered_buckets)
        super().close()

    def on_processing_time(self, timer: InternalTimer) -> None:
        """The join registers no processing-time timers (as Flink: nothing to do)."""
