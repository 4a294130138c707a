"""Timestamp assignment and watermark generation for one operator instance, shared by
:class:`~rill.operators.watermark.TimestampsAndWatermarksOperator` and the
:class:`~rill.operators.source_operator.SourceOperator` (Flink's
``ProgressiveTimestampsAndWatermarks`` of sources and the body of its
``TimestampsAndWatermarksOperator``).

Per batch: the timestamp assigner runs over the whole batch (one ``map``), the timestamps are
checked in C-speed passes (``type`` set, ``min``, ``max``), the generator sees the batch (its
batch handler with ``max(timestamps)``, or ``on_event`` per record), and the batch is emitted
with its new timestamps. Periodic emission is a processing-time timer with a fixed delay of
``auto_watermark_interval_ms`` (Flink re-registers the timer ``interval`` after each firing),
so it runs as a mail on the task thread, between batches.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any, Callable, List, Optional

from rill.operators.base import Output, attribute_error
from rill.common.eventtime import NoWatermarksGenerator
from rill.operators.watermark.output import WatermarkToDataOutput
from rill.common.streamrecord import MAX_TIMESTAMP, MAX_WATERMARK, MIN_TIMESTAMP

__all__ = ["TimestampsAndWatermarks", "GeneratorContext"]

_REPR_LIMIT = 200


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as e:  # noqa: BLE001 - a broken __repr__ must not hide the real error
        text = f"<{type(value).__name__} with failing repr: {e!r}>"
    return text if len(text) <= _REPR_LIMIT else text[:_REPR_LIMIT - 3] + "..."


class GeneratorContext:
    """What a watermark generator supplier may ask for (Flink's
    ``WatermarkGeneratorSupplier.Context``).

    :param clock: processing time in ms (the task's ``ProcessingTimeService``).
    :param operator_name: the operator running the generator.
    """

    __slots__ = ("_clock", "operator_name")

    def __init__(self, clock: Callable[[], int], operator_name: str):
        self._clock = clock
        self.operator_name = operator_name

    def get_input_activity_clock(self) -> Callable[[], int]:
        """A zero-argument callable returning processing time in ms (for idleness)."""
        return self._clock


class GeneratesWatermarks:
    """An operator that assigns timestamps and generates watermarks itself (``SourceOperator``
    with a strategy, ``TimestampsAndWatermarksOperator``): a source task finds the one whose
    strategy asks for watermark alignment through this interface."""

    @property
    def timestamps_and_watermarks(self) -> Optional["TimestampsAndWatermarks"]:
        """The operator's :class:`TimestampsAndWatermarks` once opened (``None`` before, or
        when it generates none)."""
        return self._timestamps_and_watermarks


class TimestampsAndWatermarks:
    """Assigns timestamps and runs a watermark generator for one operator instance.

    Life cycle: :meth:`open` (creates assigner, generator, starts periodic emission) →
    :meth:`emit_batch` … / :meth:`emit_periodic_watermark` … → :meth:`emit_end_of_input`
    → :meth:`close` (cancels the timer; always safe).

    :param watermark_strategy: a ``WatermarkStrategy``.
    :param operator_name: named in errors.
    """

    def __init__(self, watermark_strategy: Any, operator_name: str):
        self.watermark_strategy = watermark_strategy
        self.operator_name = operator_name
        self._output: Optional[Output] = None
        self._wm_output: Optional[WatermarkToDataOutput] = None
        self._extract: Optional[Callable[[Any, Optional[int]], Any]] = None
        self._generator: Any = None
        self._batch_handler = None
        self._needs_timestamps = True
        self._timer = None

    # -- life cycle ------------------------------------------------------------------------
    def open(self, output: Output, processing_time_service: Any, auto_watermark_interval_ms: int) -> None:
        strategy = self.watermark_strategy
        self._output = output
        self._wm_output = WatermarkToDataOutput(output)
        self._extract = strategy.create_timestamp_assigner()
        clock = processing_time_service.get_current_processing_time
        generator = strategy.create_watermark_generator(GeneratorContext(clock, self.operator_name))
        for method in ("on_event", "on_periodic_emit"):
            if not callable(getattr(generator, method, None)):
                raise TypeError(
                    f"The watermark generator of operator '{self.operator_name}' "
                    f"({type(generator).__name__}) has no {method}() method"
                )
        self._generator = generator
        get_handler = getattr(generator, "get_batch_handler", None)
        self._batch_handler = get_handler() if get_handler is not None else None
        self._needs_timestamps = not isinstance(generator, NoWatermarksGenerator)
        if auto_watermark_interval_ms and auto_watermark_interval_ms > 0 and self._needs_timestamps:
            self._timer = processing_time_service.schedule_with_fixed_delay(
                self._on_periodic_timer, auto_watermark_interval_ms, auto_watermark_interval_ms)

    def close(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    @property
    def watermark_output(self) -> WatermarkToDataOutput:
        return self._wm_output

    def current_watermark(self) -> int:
        """The greatest watermark emitted so far (ms), :data:`MAX_TIMESTAMP` while the output
        is idle: what a source reports for watermark alignment (Flink reports idle as
        ``Long.MAX_VALUE``)."""
        wm_output = self._wm_output
        return MAX_TIMESTAMP if wm_output.is_idle else wm_output.max_watermark_so_far

    # -- records ---------------------------------------------------------------------------
    def emit_batch(self, values: List[Any], timestamps: Optional[List[int]]) -> None:
        """Assign timestamps to ``values`` (``timestamps`` are the records' previous ones, or
        ``None``), let the generator see them, and emit them.

        :raises TypeError: if the assigner returns anything but an int (the records before
            the bad one are emitted first).
        :raises ValueError: for an int outside Java's long range, or a record without a
            timestamp when the strategy has no assigner.
        """
        if not values:
            return
        wm_output = self._wm_output
        if wm_output.is_idle:
            wm_output.mark_active()
        extract = self._extract
        if extract is None:
            if timestamps is None:
                if self._needs_timestamps:
                    raise ValueError(
                        f"Operator '{self.operator_name}' got record {_short_repr(values[0])} without a "
                        f"timestamp and its WatermarkStrategy has no timestamp assigner; add one with "
                        f"WatermarkStrategy.with_timestamp_assigner()"
                    )
                self._output.collect_batch(values, None)
                return
            # the max is only read by a generator's batch handler: no scan for the others
            self._emit(values, timestamps, max(timestamps) if self._batch_handler is not None else None)
            return
        if timestamps is None:
            new_ts = list(map(extract, values, repeat(None)))
        else:
            new_ts = list(map(extract, values, timestamps))
        if {*map(type, new_ts)} == {int}:
            lo, hi = min(new_ts), max(new_ts)
            if lo >= MIN_TIMESTAMP and hi <= MAX_TIMESTAMP:
                self._emit(values, new_ts, hi)
                return
        self._emit_checked(values, new_ts)

    def _emit(self, values: List[Any], timestamps: List[int], max_timestamp: int) -> None:
        handler = self._batch_handler
        if handler is not None:
            handler(values, timestamps, max_timestamp, self._wm_output)
            self._output.collect_batch(values, timestamps)
            return
        # per record, as Flink: the record, then on_event (which may emit a watermark)
        on_event = self._generator.on_event
        wm_output = self._wm_output
        wm_output.begin_batch(values, timestamps)
        try:
            for i, (value, ts) in enumerate(zip(values, timestamps)):
                wm_output.current = i + 1
                on_event(value, ts, wm_output)
        finally:
            wm_output.end_batch()

    def _emit_checked(self, values: List[Any], new_ts: List[Any]) -> None:
        """Slow path: converts int subclasses, emits the records before the first bad
        timestamp, then raises naming the record and the value."""
        for i, ts in enumerate(new_ts):
            if type(ts) is int and MIN_TIMESTAMP <= ts <= MAX_TIMESTAMP:
                continue
            if isinstance(ts, int) and not isinstance(ts, bool) and MIN_TIMESTAMP <= ts <= MAX_TIMESTAMP:
                new_ts[i] = int(ts)
                continue
            if i:
                good = new_ts[:i]
                self._emit(values[:i], good, max(good))
            prefix = (f"Timestamp assigner of operator '{self.operator_name}' returned "
                      f"{_short_repr(ts)} ({type(ts).__name__}) for record {_short_repr(values[i])}")
            if isinstance(ts, int) and not isinstance(ts, bool):
                raise ValueError(f"{prefix}; it must return an int of epoch milliseconds between "
                                 f"{MIN_TIMESTAMP} and {MAX_TIMESTAMP}")
            raise TypeError(f"{prefix}; it must return an int of epoch milliseconds")
        self._emit(values, new_ts, max(new_ts))

    # -- watermarks ------------------------------------------------------------------------
    def emit_periodic_watermark(self) -> None:
        """``on_periodic_emit`` of the generator (called by the timer, and at finish)."""
        self._generator.on_periodic_emit(self._wm_output)

    def _on_periodic_timer(self, _timestamp_ms: int) -> None:
        try:
            self.emit_periodic_watermark()
        except BaseException as e:
            attribute_error(e, self.operator_name)
            raise

    def emit_end_of_input(self) -> None:
        """Emit ``MAX_WATERMARK`` (marks an idle output active first)."""
        self._wm_output.emit_watermark(MAX_WATERMARK)
