"""``WatermarkStrategy`` and ``TimestampAssigner`` (PyFlink's
``pyflink.common.watermark_strategy``; Flink's ``org.apache.flink.api.common.eventtime``).

A strategy says how a stream gets event time: a *timestamp assigner* extracts each record's
timestamp (epoch ms, an ``int``) and a *watermark generator* turns timestamps (and processing
time) into watermarks. Use it with ``DataStream.assign_timestamps_and_watermarks(strategy)`` or
``env.from_source(source, strategy, name)``::

    strategy = (WatermarkStrategy
                .for_bounded_out_of_orderness(Duration.of_seconds(5))
                .with_timestamp_assigner(lambda event, record_timestamp: event["ts"])
                .with_idleness(Duration.of_minutes(1)))

Strategies are immutable: every ``with_*`` returns a new strategy. Each parallel instance of
the operator creates its own assigner and generator from the strategy (in ``open``), so a
strategy is a plan object that must pickle (cloudpickle: lambdas are fine).

Rill differences from Flink:

- ``record_timestamp`` is ``None`` for records without a timestamp (Flink passes
  ``Long.MIN_VALUE``).
- Without a timestamp assigner the records keep their timestamps; a record without one then
  fails the job, naming the operator (Flink silently uses ``Long.MIN_VALUE``), unless the
  strategy is ``no_watermarks()``. ``from_source`` needs an assigner (source records carry no
  timestamps) and says so when the program is built.
- Invalid durations (negative out-of-orderness, non-positive idle timeout) raise
  ``ValueError`` when the strategy is built, not when the job runs.
- ``for_generator`` takes a callable returning a generator; it gets the
  ``GeneratorContext`` (``get_input_activity_clock()``) if it accepts one argument.
"""

from __future__ import annotations

import abc
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

from rill.common import eventtime as g
from rill.common.eventtime import WatermarkGenerator, WatermarkOutput, WatermarksWithIdleness
from rill.common.streamrecord import Watermark
from rill.common.time import Duration

__all__ = ["WatermarkStrategy", "TimestampAssigner", "WatermarkAlignmentParams",
           "AssignerWithPeriodicWatermarksWrapper"]
# WatermarkGenerator and WatermarkOutput (rill.common.eventtime) are reachable here too, as in
# PyFlink's watermark_strategy module.


class TimestampAssigner(abc.ABC):
    """Extracts a record's event timestamp (PyFlink's ``TimestampAssigner``)."""

    @abc.abstractmethod
    def extract_timestamp(self, value: Any, record_timestamp: Optional[int]) -> int:
        """The timestamp of ``value`` in epoch milliseconds, as an ``int``.

        :param record_timestamp: the record's current timestamp, or ``None`` if it has none.
        """


class _FunctionTimestampAssigner(TimestampAssigner):
    """Wraps a plain callable ``(value, record_timestamp) -> int``."""

    def __init__(self, fn: Callable[[Any, Optional[int]], int]):
        self.fn = fn
        self.extract_timestamp = fn  # bound straight to the callable: no extra call per record

    def extract_timestamp(self, value, record_timestamp):  # pragma: no cover - replaced per instance
        raise AssertionError

    def __repr__(self) -> str:
        return f"TimestampAssigner({getattr(self.fn, '__qualname__', self.fn)!r})"


def _duration_ms(duration: Any, what: str) -> int:
    to_ms = getattr(duration, "to_milliseconds", None)
    if to_ms is None or isinstance(duration, (int, float)):
        raise TypeError(
            f"{what} expects a Duration (e.g. Duration.of_seconds(5)), got {duration!r} "
            f"({type(duration).__name__})"
        )
    ms = to_ms()
    if isinstance(ms, bool) or not isinstance(ms, int):
        raise TypeError(f"{what}: {duration!r}.to_milliseconds() returned {ms!r}, not an int")
    return ms


def _takes_args(fn: Callable, n: int) -> Optional[bool]:
    """Whether ``fn`` can be called with ``n`` positional arguments (``None``: unknown)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        sig.bind(*([None] * n))
    except TypeError:
        return False
    return True


class _BuiltinGenerator:
    """Picklable supplier of a built-in generator."""

    __slots__ = ("kind", "out_of_orderness_ms")

    def __init__(self, kind: str, out_of_orderness_ms: int = 0):
        self.kind = kind
        self.out_of_orderness_ms = out_of_orderness_ms

    def __getstate__(self):
        return (self.kind, self.out_of_orderness_ms)

    def __setstate__(self, state):
        self.kind, self.out_of_orderness_ms = state

    def __call__(self, context: Any) -> Any:
        if self.kind == "monotonous":
            return g.AscendingTimestampsWatermarks()
        if self.kind == "bounded":
            return g.BoundedOutOfOrdernessWatermarks(self.out_of_orderness_ms)
        return g.NoWatermarksGenerator()

    def __repr__(self) -> str:
        if self.kind == "monotonous":
            return "for_monotonous_timestamps()"
        if self.kind == "bounded":
            return f"for_bounded_out_of_orderness(Duration.of_millis({self.out_of_orderness_ms}))"
        return "no_watermarks()"


@dataclass(frozen=True)
class WatermarkAlignmentParams:
    """What ``with_watermark_alignment`` set (Flink's ``WatermarkAlignmentParams``, FLIP-182).

    :ivar watermark_group: sources with the same group are aligned with each other.
    :ivar max_allowed_watermark_drift_ms: how far (ms) a source's watermark may run ahead of the
        group's minimum before the source stops reading.
    :ivar update_interval_ms: how often (ms) each source subtask reports its watermark and
        learns the group's minimum (Flink's default: 1000).
    """

    watermark_group: str
    max_allowed_watermark_drift_ms: int
    update_interval_ms: int = 1000


class WatermarkStrategy:
    """How to assign timestamps and generate watermarks (PyFlink's ``WatermarkStrategy``).

    Build one with the static factories; do not call the constructor.
    """

    def __init__(self, generator_supplier: Callable[..., Any], supplier_takes_context: bool,
                 timestamp_assigner: Optional[TimestampAssigner] = None,
                 idle_timeout_ms: Optional[int] = None,
                 alignment: Optional[WatermarkAlignmentParams] = None):
        self._generator_supplier = generator_supplier
        self._supplier_takes_context = supplier_takes_context
        self._timestamp_assigner = timestamp_assigner
        self._idle_timeout_ms = idle_timeout_ms
        self._alignment = alignment

    # -- factories -----------------------------------------------------------------------
    @staticmethod
    def for_monotonous_timestamps() -> "WatermarkStrategy":
        """For timestamps that never decrease: the watermark is the greatest timestamp seen
        minus 1 ms (Flink's ``AscendingTimestampsWatermarks``)."""
        return WatermarkStrategy(_BuiltinGenerator("monotonous"), True)

    @staticmethod
    def for_bounded_out_of_orderness(max_out_of_orderness: Duration) -> "WatermarkStrategy":
        """For records at most ``max_out_of_orderness`` late: the watermark is the greatest
        timestamp seen minus ``max_out_of_orderness`` minus 1 ms (Flink's
        ``BoundedOutOfOrdernessWatermarks``).

        :raises TypeError: if ``max_out_of_orderness`` is not a ``Duration``.
        :raises ValueError: if it is negative.
        """
        ms = _duration_ms(max_out_of_orderness, "WatermarkStrategy.for_bounded_out_of_orderness")
        if ms < 0:
            raise ValueError(
                f"WatermarkStrategy.for_bounded_out_of_orderness: the max out-of-orderness must not "
                f"be negative, got {ms} ms"
            )
        return WatermarkStrategy(_BuiltinGenerator("bounded", ms), True)

    @staticmethod
    def for_generator(generator_supplier: Callable[..., Any]) -> "WatermarkStrategy":
        """Watermarks from a custom generator: ``generator_supplier`` is called once per
        parallel instance (with the ``GeneratorContext`` if it takes one argument, else with
        none) and returns an object with ``on_event(event, event_timestamp, output)`` and
        ``on_periodic_emit(output)`` (subclass
        :class:`rill.operators.watermark.WatermarkGenerator`).

        :raises TypeError: if ``generator_supplier`` is not callable.
        """
        if not callable(generator_supplier):
            raise TypeError(
                f"WatermarkStrategy.for_generator expects a callable that returns a "
                f"WatermarkGenerator, got {generator_supplier!r}"
            )
        takes_none = _takes_args(generator_supplier, 0)
        takes_context = not takes_none and bool(_takes_args(generator_supplier, 1))
        if takes_none is False and not takes_context:
            raise TypeError(
                f"WatermarkStrategy.for_generator: {generator_supplier!r} must be callable with no "
                f"argument or with the generator context"
            )
        return WatermarkStrategy(generator_supplier, takes_context)

    @staticmethod
    def no_watermarks() -> "WatermarkStrategy":
        """No watermarks at all (for streams that use processing time only)."""
        return WatermarkStrategy(_BuiltinGenerator("none"), True)

    # -- modifiers -------------------------------------------------------------------------
    def with_timestamp_assigner(
            self, timestamp_assigner: Union[TimestampAssigner, Callable[[Any, Optional[int]], int]]
    ) -> "WatermarkStrategy":
        """A copy that extracts timestamps with ``timestamp_assigner``: a
        :class:`TimestampAssigner` or a callable ``(value, record_timestamp) -> int`` (epoch
        ms). At run time, anything but an ``int`` fails the job naming the operator, the
        record and the value.

        :raises TypeError: if it is neither, or cannot take two arguments.
        """
        if isinstance(timestamp_assigner, TimestampAssigner):
            assigner = timestamp_assigner
        elif callable(getattr(timestamp_assigner, "extract_timestamp", None)):
            assigner = timestamp_assigner
        elif callable(timestamp_assigner):
            if _takes_args(timestamp_assigner, 2) is False:
                raise TypeError(
                    f"WatermarkStrategy.with_timestamp_assigner: {timestamp_assigner!r} must take two "
                    f"arguments (value, record_timestamp)"
                )
            assigner = _FunctionTimestampAssigner(timestamp_assigner)
        else:
            raise TypeError(
                f"WatermarkStrategy.with_timestamp_assigner expects a TimestampAssigner or a callable "
                f"(value, record_timestamp) -> int, got {timestamp_assigner!r}"
            )
        return WatermarkStrategy(self._generator_supplier, self._supplier_takes_context, assigner,
                                 self._idle_timeout_ms, self._alignment)

    def with_idleness(self, idle_timeout: Duration) -> "WatermarkStrategy":
        """A copy whose generator marks the stream idle after ``idle_timeout`` of processing
        time without records (Flink's ``WatermarksWithIdleness``): downstream operators then
        leave it out of their watermark, so it does not hold event time back. The next record
        makes it active again.

        :raises TypeError: if ``idle_timeout`` is not a ``Duration``.
        :raises ValueError: if it is not greater than zero.
        """
        ms = _duration_ms(idle_timeout, "WatermarkStrategy.with_idleness")
        if ms <= 0:
            raise ValueError(f"WatermarkStrategy.with_idleness: the idle timeout must be greater than "
                             f"zero, got {ms} ms")
        return WatermarkStrategy(self._generator_supplier, self._supplier_takes_context,
                                 self._timestamp_assigner, ms, self._alignment)

    def with_watermark_alignment(self, watermark_group: str, max_allowed_watermark_drift: Duration,
                                 update_interval: Optional[Duration] = None) -> "WatermarkStrategy":
        """A copy whose sources keep their watermarks within ``max_allowed_watermark_drift`` of
        the slowest source of ``watermark_group`` (PyFlink's ``with_watermark_alignment``,
        FLIP-182 / FLIP-217): every ``update_interval`` (default 1 s) each source subtask
        reports its current watermark to the JobMaster, which answers with the group's minimum;
        a subtask whose watermark is more than the drift ahead of it stops reading (its time
        counts as back-pressured) until the minimum catches up. Idle and finished subtasks do
        not hold the group back. Sources of one group may be different sources of one job
        (the two inputs of a join, say).

        Sources only: give the strategy to ``env.from_source(source, strategy, name)``, or to
        ``assign_timestamps_and_watermarks`` right after a source (Rill then aligns that
        source; Flink ignores alignment there).

        :raises TypeError: if the group is not a non-empty ``str`` or a duration not a ``Duration``.
        :raises ValueError: if the drift is negative or the update interval not positive.
        """
        if not isinstance(watermark_group, str) or not watermark_group:
            raise TypeError(f"WatermarkStrategy.with_watermark_alignment: the watermark group must be a "
                            f"non-empty str, got {watermark_group!r}")
        drift = _duration_ms(max_allowed_watermark_drift, "WatermarkStrategy.with_watermark_alignment")
        if drift < 0:
            raise ValueError(f"WatermarkStrategy.with_watermark_alignment: the max allowed watermark drift "
                             f"must not be negative, got {drift} ms")
        interval = 1000 if update_interval is None else _duration_ms(
            update_interval, "WatermarkStrategy.with_watermark_alignment")
        if interval <= 0:
            raise ValueError(f"WatermarkStrategy.with_watermark_alignment: the update interval must be "
                             f"greater than zero, got {interval} ms")
        return WatermarkStrategy(self._generator_supplier, self._supplier_takes_context,
                                 self._timestamp_assigner, self._idle_timeout_ms,
                                 WatermarkAlignmentParams(watermark_group, drift, interval))

    def get_alignment_parameters(self) -> Optional[WatermarkAlignmentParams]:
        """The alignment ``with_watermark_alignment`` set, or ``None`` (Flink:
        ``WATERMARK_ALIGNMENT_DISABLED``)."""
        return self._alignment

    # -- used by the runtime -----------------------------------------------------------------
    @property
    def is_no_watermarks(self) -> bool:
        """``True`` for ``no_watermarks()`` (with or without an assigner)."""
        s = self._generator_supplier
        return isinstance(s, _BuiltinGenerator) and s.kind == "none" and self._idle_timeout_ms is None

    def get_timestamp_assigner(self) -> Optional[TimestampAssigner]:
        return self._timestamp_assigner

    def get_idle_timeout_ms(self) -> Optional[int]:
        return self._idle_timeout_ms

    def create_timestamp_assigner(self) -> Optional[Callable[[Any, Optional[int]], Any]]:
        """The assigner's ``extract_timestamp`` (``None`` when records keep their
        timestamps)."""
        a = self._timestamp_assigner
        return None if a is None else a.extract_timestamp

    def create_watermark_generator(self, context: Any) -> Any:
        """A new generator for one parallel instance (wrapped for idleness if configured).

        :param context: a ``GeneratorContext`` (processing-time clock, operator name).
        """
        supplier = self._generator_supplier
        generator = supplier(context) if self._supplier_takes_context else supplier()
        if self._idle_timeout_ms is not None:
            generator = WatermarksWithIdleness(generator, self._idle_timeout_ms,
                                               context.get_input_activity_clock())
        return generator

    def __repr__(self) -> str:
        parts = [f"WatermarkStrategy.{self._generator_supplier!r}"
                 if isinstance(self._generator_supplier, _BuiltinGenerator)
                 else f"WatermarkStrategy.for_generator({self._generator_supplier!r})"]
        if self._timestamp_assigner is not None:
            parts.append(f"with_timestamp_assigner({self._timestamp_assigner!r})")
        if self._idle_timeout_ms is not None:
            parts.append(f"with_idleness(Duration.of_millis({self._idle_timeout_ms}))")
        a = self._alignment
        if a is not None:
            parts.append(f"with_watermark_alignment({a.watermark_group!r}, Duration.of_millis("
                         f"{a.max_allowed_watermark_drift_ms}), Duration.of_millis({a.update_interval_ms}))")
        return ".".join(parts)


class _PeriodicAssignerGenerator(WatermarkGenerator):
    """Asks a legacy assigner for its watermark on every periodic emit (Flink's
    ``AssignerWithPeriodicWatermarksAdapter``); events reach the assigner through
    ``extract_timestamp`` only."""

    def __init__(self, assigner: Any):
        self._assigner = assigner

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        pass

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        watermark = self._assigner.get_current_watermark()
        if watermark is not None:
            output.emit_watermark(Watermark(watermark))

    def get_batch_handler(self):
        return _ignore_batch


def _ignore_batch(values, timestamps, max_timestamp, output) -> None:
    """The legacy assigner saw the batch's records in ``extract_timestamp`` already."""


class _PeriodicAssignerSupplier:
    def __init__(self, assigner: Any):
        self.assigner = assigner

    def __call__(self) -> _PeriodicAssignerGenerator:
        return _PeriodicAssignerGenerator(self.assigner)


class AssignerWithPeriodicWatermarksWrapper(WatermarkStrategy):
    """A legacy periodic assigner as a ``WatermarkStrategy`` (Flink's
    ``AssignerWithPeriodicWatermarksAdapter.Strategy``; PyFlink's
    ``AssignerWithPeriodicWatermarksWrapper``, which wraps a Java one).

    ``assigner`` has Flink's ``AssignerWithPeriodicWatermarks`` methods:
    ``extract_timestamp(element, record_timestamp) -> int`` (epoch ms), called per record, and
    ``get_current_watermark() -> Optional[int]`` (epoch ms, or ``None`` for no watermark yet),
    called every ``auto_watermark_interval_ms``. Each parallel instance gets its own copy of the
    assigner, used for both. Pass it wherever a ``WatermarkStrategy`` goes
    (``assign_timestamps_and_watermarks``, ``from_source``).

    :raises TypeError: if ``assigner`` lacks one of the two methods.
    """

    def __init__(self, assigner: Any):
        for method in ("extract_timestamp", "get_current_watermark"):
            if not callable(getattr(assigner, method, None)):
                raise TypeError(f"AssignerWithPeriodicWatermarksWrapper: {assigner!r} has no {method}() "
                                f"(an AssignerWithPeriodicWatermarks has extract_timestamp and "
                                f"get_current_watermark)")
        super().__init__(_PeriodicAssignerSupplier(assigner), False, assigner)
