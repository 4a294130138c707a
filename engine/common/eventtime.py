"""Watermark generators and the output they emit to (Flink's ``WatermarkGenerator``,
``WatermarkOutput``, ``BoundedOutOfOrdernessWatermarks``, ``AscendingTimestampsWatermarks``,
``NoWatermarksGenerator``, ``WatermarksWithIdleness``; ``org.apache.flink.api.common.eventtime``).

A generator sees every event's timestamp (:meth:`WatermarkGenerator.on_event`) and is asked
every ``auto_watermark_interval_ms`` of processing time to emit (:meth:`on_periodic_emit`).
Both run on the task thread; a generator needs no lock.

Batch hook (a Rill addition, for speed): a generator may return from
:meth:`WatermarkGenerator.get_batch_handler` a callable ``(values, timestamps, max_timestamp,
output)`` that replaces the per-record ``on_event`` calls for a whole batch. Only generators
whose result does not depend on the order of events inside a batch and that emit nothing from
``on_event`` may do that (the built-in periodic generators, which only keep the maximum
timestamp: as periodic emission runs between batches, keeping ``max(timestamps)`` per batch is
the same as calling ``on_event`` per record). Generators without the hook get ``on_event`` per
record, with records and watermarks interleaved exactly as Flink does.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from rill.common.streamrecord import MIN_TIMESTAMP, Watermark

__all__ = [
    "WatermarkOutput",
    "WatermarkGenerator",
    "BatchHandler",
    "BoundedOutOfOrdernessWatermarks",
    "AscendingTimestampsWatermarks",
    "NoWatermarksGenerator",
    "WatermarksWithIdleness",
    "IdlenessTimer",
]

#: ``(values, timestamps, max_timestamp, output) -> None``: a whole batch's events at once.
BatchHandler = Callable[[List[Any], List[int], int, "WatermarkOutput"], None]


class WatermarkOutput:
    """Where a generator emits watermarks and idleness (Flink's ``WatermarkOutput``).

    The runtime's implementation (:class:`~rill.operators.watermark.output.WatermarkToDataOutput`)
    forwards a watermark only if it is greater than every watermark forwarded before, and a
    status only when it changes.
    """

    def emit_watermark(self, watermark: Watermark) -> None:
        """Emit ``watermark``; emitting one also marks the output active again."""
        raise NotImplementedError

    def mark_idle(self) -> None:
        """This output has no events for now: downstream leaves it out of its watermark."""
        raise NotImplementedError

    def mark_active(self) -> None:
        """This output has events again (undoes :meth:`mark_idle`)."""
        raise NotImplementedError


class WatermarkGenerator:
    """Generates watermarks from events and/or periodically (Flink's ``WatermarkGenerator``).

    Subclass it (or write any class with these two methods) and hand it to
    ``WatermarkStrategy.for_generator``.
    """

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        """Called for every event with its (already assigned) timestamp in epoch ms."""

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        """Called every ``auto_watermark_interval_ms`` of processing time (never if it is 0)."""

    def get_batch_handler(self) -> Optional[BatchHandler]:
        """A callable that handles a whole batch instead of ``on_event`` per record, or
        ``None`` (the default: ``on_event`` per record). See the module docstring."""
        return None


class BoundedOutOfOrdernessWatermarks(WatermarkGenerator):
    """Periodic watermarks for events up to ``out_of_orderness_ms`` late: the watermark is
    ``max timestamp seen - out_of_orderness_ms - 1`` (Flink's
    ``BoundedOutOfOrdernessWatermarks``; before the first event the maximum starts at
    ``MIN_TIMESTAMP + out_of_orderness_ms + 1``, so the first emission is ``MIN_TIMESTAMP``).

    :raises ValueError: if ``out_of_orderness_ms`` is negative or not an int.
    """

    def __init__(self, out_of_orderness_ms: int):
        if isinstance(out_of_orderness_ms, bool) or not isinstance(out_of_orderness_ms, int) \
                or out_of_orderness_ms < 0:
            raise ValueError(
                f"The max out-of-orderness must be an int >= 0 ms, got {out_of_orderness_ms!r}"
            )
        self.out_of_orderness_ms = out_of_orderness_ms
        self.max_timestamp = MIN_TIMESTAMP + out_of_orderness_ms + 1

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        if event_timestamp > self.max_timestamp:
            self.max_timestamp = event_timestamp

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        output.emit_watermark(Watermark(self.max_timestamp - self.out_of_orderness_ms - 1))

    def get_batch_handler(self) -> Optional[BatchHandler]:
        return self._on_batch

    def _on_batch(self, values: List[Any], timestamps: List[int], max_timestamp: int,
                  output: WatermarkOutput) -> None:
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp

    def __repr__(self) -> str:
        return f"{type(self).__name__}(out_of_orderness_ms={self.out_of_orderness_ms})"


class AscendingTimestampsWatermarks(BoundedOutOfOrdernessWatermarks):
    """Periodic watermarks for timestamps that never decrease: ``max timestamp - 1`` (Flink's
    ``AscendingTimestampsWatermarks``, bounded out-of-orderness of 0)."""

    def __init__(self) -> None:
        super().__init__(0)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class NoWatermarksGenerator(WatermarkGenerator):
    """Emits no watermarks at all (Flink's ``NoWatermarksGenerator``)."""

    def get_batch_handler(self) -> Optional[BatchHandler]:
        return _ignore_batch

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _ignore_batch(values, timestamps, max_timestamp, output) -> None:
    pass


class IdlenessTimer:
    """Decides when an input is idle (Flink's ``WatermarksWithIdleness.IdlenessTimer``).

    :meth:`activity` counts events; :meth:`check_if_idle` (called at each periodic emission)
    notes the clock at the first check that saw no new activity and answers ``True`` once more
    than ``idle_timeout_ms`` passed since then. The input is therefore declared idle between
    ``idle_timeout_ms`` and ``idle_timeout_ms`` plus two emission intervals after its last
    event, as in Flink.

    :param clock: returns the current processing time in ms (the task's
        ``ProcessingTimeService`` in production, the test clock in the harness).
    """

    __slots__ = ("_clock", "_idle_timeout_ms", "_counter", "_last_counter", "_start_of_inactivity_ms")

    def __init__(self, clock: Callable[[], int], idle_timeout_ms: int):
        self._clock = clock
        self._idle_timeout_ms = idle_timeout_ms
        self._counter = 0
        self._last_counter = 0
        self._start_of_inactivity_ms: Optional[int] = None

    def activity(self) -> None:
        self._counter += 1

    def check_if_idle(self) -> bool:
        if self._counter != self._last_counter:
            # activity since the last check: not idle, start over
            self._last_counter = self._counter
            self._start_of_inactivity_ms = None
            return False
        if self._start_of_inactivity_ms is None:
            # first check without activity: note the time, not idle yet
            self._start_of_inactivity_ms = self._clock()
            return False
        return self._clock() - self._start_of_inactivity_ms > self._idle_timeout_ms


class WatermarksWithIdleness(WatermarkGenerator):
    """Wraps a generator; marks the output idle once no event arrived for more than
    ``idle_timeout_ms`` of processing time (Flink's ``WatermarksWithIdleness``). While idle,
    periodic emission emits nothing; the next event makes the output active again (the
    runtime marks it active before that event is emitted, see
    :class:`~rill.operators.watermark.output.WatermarkToDataOutput`).

    :param watermarks: the wrapped generator.
    :param idle_timeout_ms: > 0.
    :param clock: processing time in ms.
    :raises ValueError: for a timeout that is not a positive int.
    """

    def __init__(self, watermarks: Any, idle_timeout_ms: int, clock: Callable[[], int]):
        if isinstance(idle_timeout_ms, bool) or not isinstance(idle_timeout_ms, int) or idle_timeout_ms <= 0:
            raise ValueError(f"The idle timeout must be an int > 0 ms, got {idle_timeout_ms!r}")
        self.watermarks = watermarks
        self.idle_timeout_ms = idle_timeout_ms
        self._timer = IdlenessTimer(clock, idle_timeout_ms)

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        self.watermarks.on_event(event, event_timestamp, output)
        self._timer.activity()

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        if self._timer.check_if_idle():
            output.mark_idle()
        else:
            self.watermarks.on_periodic_emit(output)

    def get_batch_handler(self) -> Optional[BatchHandler]:
        inner = getattr(self.watermarks, "get_batch_handler", None)
        handler = inner() if inner is not None else None
        if handler is None:
            return None
        activity = self._timer.activity

        def on_batch(values, timestamps, max_timestamp, output) -> None:
            handler(values, timestamps, max_timestamp, output)
            activity()

        return on_batch

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.watermarks!r}, idle_timeout_ms={self.idle_timeout_ms})"
