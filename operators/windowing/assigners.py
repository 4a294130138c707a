"""Window assigners (Flink's ``org.apache.flink.streaming.api.windowing.assigners``; PyFlink's
``pyflink.datastream.window``): which windows an element belongs to, whether they merge, and
the default trigger.

Times and sizes are epoch ms; every size, slide, gap and offset also accepts a
``datetime.timedelta`` or an object with ``to_milliseconds()`` (PyFlink's ``Time`` /
``Duration``). Static parameters are checked when the assigner is built (``ValueError`` naming
the assigner, the rule and the value); dynamic gaps are checked per record.

Event-time assigners need a timestamp on every record: a record without one fails with Flink's
message (:data:`NO_TIMESTAMP_MESSAGE`) naming the operator. Rill difference: Flink's session
assigners do not check, and put such a record in a window at ``Long.MIN_VALUE``; Rill raises
for every event-time assigner.
"""

from __future__ import annotations

import abc
from typing import Any, Callable, Collection, Iterable, List, Optional, Union

from rill.operators.windowing.triggers import (
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    Trigger,
)
from rill.operators.windowing.window_serializers import GlobalWindowSerializer, TimeWindowSerializer
from rill.operators.windowing.windows import GlobalWindow, TimeWindow, Window, to_milliseconds

__all__ = [
    "NO_TIMESTAMP_MESSAGE",
    "MissingTimestampError",
    "WindowAssigner",
    "MergingWindowAssigner",
    "SessionWindowTimeGapExtractor",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "EventTimeSessionWindows",
    "ProcessingTimeSessionWindows",
    "DynamicEventTimeSessionWindows",
    "DynamicProcessingTimeSessionWindows",
    "GlobalWindows",
]

#: Flink's message for a record without timestamp reaching an event-time assigner.
NO_TIMESTAMP_MESSAGE = (
    "Record has Long.MIN_VALUE timestamp (= no timestamp marker). Is the time characteristic set "
    "to 'ProcessingTime', or did you forget to call 'DataStream.assignTimestampsAndWatermarks(...)'?"
)

Millis = Union[int, Any]


class MissingTimestampError(RuntimeError):
    """A record without timestamp reached an event-time window assigner (Flink raises a
    ``RuntimeException`` with :data:`NO_TIMESTAMP_MESSAGE`)."""


def _no_timestamp(assigner: "WindowAssigner", context: Any) -> MissingTimestampError:
    operator = getattr(context, "operator_name", None)
    where = f" (operator '{operator}', assigner {assigner})" if operator else f" (assigner {assigner})"
    return MissingTimestampError(NO_TIMESTAMP_MESSAGE + where)


class WindowAssigner(abc.ABC):
    """Assigns zero or more windows to an element (Flink's ``WindowAssigner``; PyFlink's
    ``WindowAssigner``). Subclass it for a custom assigner.

    An assigner is part of the job plan: it is copied into every subtask, so it must not keep
    per-record state in attributes.
    """

    class WindowAssignerContext(abc.ABC):
        """What an assigner may ask the operator (Flink's ``WindowAssignerContext``)."""

        @abc.abstractmethod
        def get_current_processing_time(self) -> int:
            """The task's processing time, epoch ms."""

        @abc.abstractmethod
        def get_runtime_context(self) -> Any:
            """The operator's ``RuntimeContext``."""

    @abc.abstractmethod
    def assign_windows(self, element: Any, timestamp: Optional[int], context: "WindowAssigner.WindowAssignerContext") -> Collection[Window]:
        """The windows of ``element`` (``timestamp``: epoch ms or ``None``)."""

    @abc.abstractmethod
    def get_default_trigger(self, env: Any = None) -> Trigger:
        """The trigger used unless ``WindowedStream.trigger`` sets another (``env`` is the
        ``StreamExecutionEnvironment``, as PyFlink passes it; unused by the built-ins)."""

    @abc.abstractmethod
    def is_event_time(self) -> bool:
        """Whether windows are based on event time (lateness, watermark-driven cleanup)."""

    def get_window_serializer(self) -> Any:
        """The binary form of this assigner's windows (a ``TypeSerializer``; the built-in
        assigners return Flink's). Rill's window operator keeps windows as Python objects and
        does not call it; a custom assigner may leave it ``None``."""
        return None

    def is_merging(self) -> bool:
        """Whether windows of this assigner merge (``MergingWindowAssigner``)."""
        return False


class MergingWindowAssigner(WindowAssigner):
    """An assigner whose windows can merge (Flink's ``MergingWindowAssigner``): session
    windows. The operator keeps a ``MergingWindowSet`` per key."""

    class MergeCallback(abc.ABC):
        """Receives each merge (Flink's ``MergingWindowAssigner.MergeCallback``)."""

        @abc.abstractmethod
        def merge(self, to_be_merged: Iterable[Window], merge_result: Window) -> None: ...

    @abc.abstractmethod
    def merge_windows(self, windows: Iterable[Window], callback: Any) -> None:
        """Find the windows of ``windows`` that merge and call ``callback.merge(to_be_merged,
        merge_result)`` for each group (a plain callable is called directly)."""

    def is_merging(self) -> bool:
        """Always ``True``."""
        return True


def _positive(value: Millis, owner: str, what: str) -> int:
    ms = to_milliseconds(value, f"{owner} {what}")
    if ms <= 0:
        raise ValueError(f"{owner} parameters must satisfy 0 < {what}, got {what} = {ms} ms")
    return ms


def _offset(offset: Millis, bound: int, owner: str, bound_name: str) -> int:
    ms = to_milliseconds(offset, f"{owner} offset")
    if abs(ms) >= bound:
        raise ValueError(
            f"{owner} parameters must satisfy abs(offset) < {bound_name}, got offset = {ms} ms and "
            f"{bound_name} = {bound} ms"
        )
    return ms


# -- tumbling -----------------------------------------------------------------------------------

class _TumblingWindows(WindowAssigner):
    __slots__ = ("size", "offset")

    def get_window_serializer(self) -> TimeWindowSerializer:
        return TimeWindowSerializer()

    def __init__(self, size: Millis, offset: Millis = 0) -> None:
        owner = type(self).__name__
        self.size = _positive(size, owner, "size")
        self.offset = _offset(offset, self.size, owner, "size")

    @classmethod
    def of(cls, size: Millis, offset: Millis = 0):
        """Windows of ``size`` ms, aligned to the epoch shifted by ``offset`` ms.

        :raises ValueError: unless ``size > 0`` and ``abs(offset) < size`` (Flink's rule
            "parameters must satisfy abs(offset) < size").
        :raises TypeError: for a size or offset that is not a number of ms.
        """
        return cls(size, offset)

    def get_size(self) -> int:
        return self.size

    def get_offset(self) -> int:
        return self.offset

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.size})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and (other.size, other.offset) == (self.size, self.offset)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.size, self.offset))


class TumblingEventTimeWindows(_TumblingWindows):
    """Non-overlapping event-time windows of a fixed size (Flink's
    ``TumblingEventTimeWindows``): an element with timestamp ``t`` falls into
    ``[start, start + size)`` with ``start = t - (t - offset) mod size``. Default trigger:
    :class:`EventTimeTrigger`.

    Create with ``TumblingEventTimeWindows.of(size, offset=0)`` (ms).

    :raises ValueError: unless ``size > 0`` and ``abs(offset) < size``.
    :raises MissingTimestampError: per record, for a record without timestamp.
    """

    def assign_windows(self, element, timestamp, context):
        if timestamp is None:
            raise _no_timestamp(self, context)
        start = timestamp - (timestamp - self.offset) % self.size
        return [TimeWindow(start, start + self.size)]

    def get_default_trigger(self, env=None) -> Trigger:
        return EventTimeTrigger.create()

    def is_event_time(self) -> bool:
        return True


class TumblingProcessingTimeWindows(_TumblingWindows):
    """Non-overlapping processing-time windows of a fixed size (Flink's
    ``TumblingProcessingTimeWindows``): the window containing the task's current processing
    time. Default trigger: :class:`ProcessingTimeTrigger`.

    Create with ``TumblingProcessingTimeWindows.of(size, offset=0)`` (ms).

    :raises ValueError: unless ``size > 0`` and ``abs(offset) < size``.
    """

    def assign_windows(self, element, timestamp, context):
        now = context.get_current_processing_time()
        start = now - (now - self.offset) % self.size
        return [TimeWindow(start, start + self.size)]

    def get_default_trigger(self, env=None) -> Trigger:
        return ProcessingTimeTrigger.create()

    def is_event_time(self) -> bool:
        return False


# -- sliding ------------------------------------------------------------------------------------

class _SlidingWindows(WindowAssigner):
    __slots__ = ("size", "slide", "offset")

    def get_window_serializer(self) -> TimeWindowSerializer:
        return TimeWindowSerializer()

    def __init__(self, size: Millis, slide: Millis, offset: Millis = 0) -> None:
        owner = type(self).__name__
        self.size = _positive(size, owner, "size")
        self.slide = _positive(slide, owner, "slide")
        self.offset = _offset(offset, self.slide, owner, "slide")

    @classmethod
    def of(cls, size: Millis, slide: Millis, offset: Millis = 0):
        """Windows of ``size`` ms starting every ``slide`` ms, aligned to the epoch shifted by
        ``offset`` ms; an element belongs to ``ceil(size / slide)`` windows (when ``slide``
        divides ``size``: ``size / slide``).

        :raises ValueError: unless ``size > 0``, ``slide > 0`` and ``abs(offset) < slide``
            (Flink's rule).
        """
        return cls(size, slide, offset)

    def get_size(self) -> int:
        return self.size

    def get_slide(self) -> int:
        return self.slide

    def _windows(self, timestamp: int) -> List[TimeWindow]:
        size, slide = self.size, self.slide
        start = timestamp - (timestamp - self.offset) % slide
        windows = []
        while start > timestamp - size:  # latest window first, as Flink
            windows.append(TimeWindow(start, start + size))
            start -= slide
        return windows

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.size}, {self.slide})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and (other.size, other.slide, other.offset) == (
            self.size, self.slide, self.offset)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.size, self.slide, self.offset))


class SlidingEventTimeWindows(_SlidingWindows):
    """Overlapping event-time windows (Flink's ``SlidingEventTimeWindows``): an element with
    timestamp ``t`` belongs to every ``[start, start + size)`` with ``start`` on the slide grid
    (shifted by ``offset``) and ``t - size < start <= t``, latest first. Default trigger:
    :class:`EventTimeTrigger`.

    :raises ValueError: unless ``size > 0``, ``slide > 0`` and ``abs(offset) < slide``.
    :raises MissingTimestampError: per record, for a record without timestamp.
    """

    def assign_windows(self, element, timestamp, context):
        if timestamp is None:
            raise _no_timestamp(self, context)
        return self._windows(timestamp)

    def get_default_trigger(self, env=None) -> Trigger:
        return EventTimeTrigger.create()

    def is_event_time(self) -> bool:
        return True


class SlidingProcessingTimeWindows(_SlidingWindows):
    """Overlapping processing-time windows (Flink's ``SlidingProcessingTimeWindows``), assigned
    from the task's current processing time. Default trigger: :class:`ProcessingTimeTrigger`.

    :raises ValueError: unless ``size > 0``, ``slide > 0`` and ``abs(offset) < slide``.
    """

    def assign_windows(self, element, timestamp, context):
        return self._windows(context.get_current_processing_time())

    def get_default_trigger(self, env=None) -> Trigger:
        return ProcessingTimeTrigger.create()

    def is_event_time(self) -> bool:
        return False


# -- sessions -----------------------------------------------------------------------------------

class SessionWindowTimeGapExtractor(abc.ABC):
    """Gives the session gap of an element, in ms (Flink's / PyFlink's
    ``SessionWindowTimeGapExtractor``). A plain callable ``element -> ms`` works too."""

    @abc.abstractmethod
    def extract(self, element: Any) -> int:
        """The gap (ms, > 0) after ``element``."""


class _SessionWindows(MergingWindowAssigner):
    """Sessions: each element opens ``[t, t + gap)``; windows that overlap or touch merge."""

    __slots__ = ("session_gap",)

    def get_window_serializer(self) -> TimeWindowSerializer:
        return TimeWindowSerializer()

    def __init__(self, session_gap: Millis) -> None:
        self.session_gap = _positive(session_gap, type(self).__name__, "gap")

    @classmethod
    def with_gap(cls, size: Millis):
        """Sessions closing after ``size`` ms without elements.

        :raises ValueError: unless ``size > 0`` (Flink: "parameters must satisfy 0 < size").
        """
        return cls(size)

    def merge_windows(self, windows, callback) -> None:
        TimeWindow.merge_windows(windows, callback)

    def get_gap(self) -> int:
        return self.session_gap

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.session_gap})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.session_gap == self.session_gap

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.session_gap))


class EventTimeSessionWindows(_SessionWindows):
    """Event-time session windows with a static gap (Flink's ``EventTimeSessionWindows``):
    ``EventTimeSessionWindows.with_gap(gap_ms)``; ``with_dynamic_gap(extractor)`` gives
    :class:`DynamicEventTimeSessionWindows`. Default trigger: :class:`EventTimeTrigger`.

    :raises ValueError: unless ``gap > 0``.
    :raises MissingTimestampError: per record, for a record without timestamp.
    """

    def assign_windows(self, element, timestamp, context):
        if timestamp is None:
            raise _no_timestamp(self, context)
        return [TimeWindow(timestamp, timestamp + self.session_gap)]

    def get_default_trigger(self, env=None) -> Trigger:
        return EventTimeTrigger.create()

    def is_event_time(self) -> bool:
        return True

    @staticmethod
    def with_dynamic_gap(extractor: Union[SessionWindowTimeGapExtractor, Callable[[Any], int]]) -> "DynamicEventTimeSessionWindows":
        """Sessions whose gap each element sets through ``extractor`` (ms, must be > 0)."""
        return DynamicEventTimeSessionWindows(extractor)


class ProcessingTimeSessionWindows(_SessionWindows):
    """Processing-time session windows with a static gap (Flink's
    ``ProcessingTimeSessionWindows``): each element opens ``[now, now + gap)``. Default
    trigger: :class:`ProcessingTimeTrigger`.

    :raises ValueError: unless ``gap > 0``.
    """

    def assign_windows(self, element, timestamp, context):
        now = context.get_current_processing_time()
        return [TimeWindow(now, now + self.session_gap)]

    def get_default_trigger(self, env=None) -> Trigger:
        return ProcessingTimeTrigger.create()

    def is_event_time(self) -> bool:
        return False

    @staticmethod
    def with_dynamic_gap(extractor: Union[SessionWindowTimeGapExtractor, Callable[[Any], int]]) -> "DynamicProcessingTimeSessionWindows":
        """Sessions whose gap each element sets through ``extractor`` (ms, must be > 0)."""
        return DynamicProcessingTimeSessionWindows(extractor)


class _DynamicSessionWindows(MergingWindowAssigner):
    __slots__ = ("gap_extractor", "_extract")

    def get_window_serializer(self) -> TimeWindowSerializer:
        return TimeWindowSerializer()

    def __init__(self, gap_extractor: Union[SessionWindowTimeGapExtractor, Callable[[Any], int]]) -> None:
        extract = getattr(gap_extractor, "extract", None)
        if not callable(extract):
            if not callable(gap_extractor):
                raise TypeError(
                    f"{type(self).__name__} needs a SessionWindowTimeGapExtractor or a callable "
                    f"element -> gap ms, got {gap_extractor!r} of type {type(gap_extractor).__name__}"
                )
            extract = gap_extractor
        self.gap_extractor = gap_extractor
        self._extract = extract

    def _gap(self, element: Any) -> int:
        gap = self._extract(element)
        if type(gap) is not int:
            gap = to_milliseconds(gap, f"{type(self).__name__} gap of {element!r}")
        if gap <= 0:
            raise ValueError(
                f"Dynamic session time gap must satisfy 0 < gap: {type(self).__name__}'s extractor "
                f"returned {gap} ms for element {element!r}"
            )
        return gap

    def merge_windows(self, windows, callback) -> None:
        TimeWindow.merge_windows(windows, callback)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class DynamicEventTimeSessionWindows(_DynamicSessionWindows):
    """Event-time sessions with a gap per element (Flink's
    ``DynamicEventTimeSessionWindows``).

    :raises ValueError: per record, when the extractor returns a gap <= 0 (naming the element).
    :raises MissingTimestampError: per record, for a record without timestamp.
    """

    def assign_windows(self, element, timestamp, context):
        if timestamp is None:
            raise _no_timestamp(self, context)
        return [TimeWindow(timestamp, timestamp + self._gap(element))]

    def get_default_trigger(self, env=None) -> Trigger:
        return EventTimeTrigger.create()

    def is_event_time(self) -> bool:
        return True


class DynamicProcessingTimeSessionWindows(_DynamicSessionWindows):
    """Processing-time sessions with a gap per element (Flink's
    ``DynamicProcessingTimeSessionWindows``).

    :raises ValueError: per record, when the extractor returns a gap <= 0.
    """

    def assign_windows(self, element, timestamp, context):
        now = context.get_current_processing_time()
        return [TimeWindow(now, now + self._gap(element))]

    def get_default_trigger(self, env=None) -> Trigger:
        return ProcessingTimeTrigger.create()

    def is_event_time(self) -> bool:
        return False


# -- global -------------------------------------------------------------------------------------

class GlobalWindows(WindowAssigner):
    """Puts every element of a key into the one :class:`GlobalWindow` (Flink's
    ``GlobalWindows``; create with ``GlobalWindows.create()``). The default trigger is
    :class:`NeverTrigger`: give a trigger (e.g. ``CountTrigger``) for the window to fire. Not
    event time; the window is never cleaned up by time."""

    __slots__ = ()

    @staticmethod
    def create() -> "GlobalWindows":
        """The assigner of the single global window (Flink's ``GlobalWindows.create()``)."""
        return GlobalWindows()

    def assign_windows(self, element, timestamp, context):
        return [GlobalWindow.get()]

    def get_default_trigger(self, env=None) -> Trigger:
        return NeverTrigger()

    def get_window_serializer(self) -> GlobalWindowSerializer:
        return GlobalWindowSerializer()

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "GlobalWindows()"

    def __eq__(self, other: object) -> bool:
        return type(other) is GlobalWindows

    def __hash__(self) -> int:
        return hash("GlobalWindows")
