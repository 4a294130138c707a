"""Triggers: when a window's function runs and whether its contents are purged (Flink's
``org.apache.flink.streaming.api.windowing.triggers``; PyFlink's ``Trigger`` and
``TriggerResult`` in ``pyflink.datastream.window``).

A trigger is called for every element added to a window (``on_element``), for every timer it
registered (``on_event_time`` / ``on_processing_time``), when windows merge (``on_merge``) and
when the window is cleaned up (``clear``, which must remove the trigger's timers and state).
It keeps per-window state only through ``ctx.get_partitioned_state(descriptor)`` (scoped to
the current key and window), never in attributes: one trigger object serves every key and
window of a subtask. Times are epoch ms.
"""

from __future__ import annotations

import abc
import enum
from typing import Any, Callable, Union

from rill.state.descriptors import ReducingStateDescriptor, ValueStateDescriptor
from rill.operators.windowing.windows import Window, java_remainder, to_milliseconds

__all__ = [
    "TriggerResult",
    "Trigger",
    "TriggerContext",
    "OnMergeContext",
    "EventTimeTrigger",
    "ProcessingTimeTrigger",
    "CountTrigger",
    "PurgingTrigger",
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "DeltaTrigger",
    "DeltaFunction",
    "NeverTrigger",
]


class TriggerResult(enum.Enum):
    """What a trigger decides (Flink's / PyFlink's ``TriggerResult``): ``CONTINUE`` (nothing),
    ``FIRE`` (run the window function, keep the contents), ``PURGE`` (drop the contents),
    ``FIRE_AND_PURGE`` (both)."""

    CONTINUE = (False, False)
    FIRE_AND_PURGE = (True, True)
    FIRE = (True, False)
    PURGE = (False, True)

    def is_fire(self) -> bool:
        """Whether the window function runs."""
        return self.value[0]

    def is_purge(self) -> bool:
        """Whether the window's contents are dropped."""
        return self.value[1]


class TriggerContext(abc.ABC):
    """What a trigger may do (Flink's ``Trigger.TriggerContext``). Timers and state are scoped
    to the current key and window; times are epoch ms."""

    @abc.abstractmethod
    def get_current_processing_time(self) -> int:
        """The task's processing time, epoch ms."""

    @abc.abstractmethod
    def get_current_watermark(self) -> int:
        """The operator's current event-time watermark, epoch ms (``MIN_TIMESTAMP`` before the first)."""

    @abc.abstractmethod
    def get_metric_group(self) -> Any:
        """The operator's metrics, or ``None`` where none are kept."""

    @abc.abstractmethod
    def register_processing_time_timer(self, time: int) -> None:
        """Call ``on_processing_time`` for this key and window when the processing time reaches ``time`` ms."""

    @abc.abstractmethod
    def register_event_time_timer(self, time: int) -> None:
        """Call ``on_event_time`` for this key and window when the watermark reaches ``time`` ms."""

    @abc.abstractmethod
    def delete_processing_time_timer(self, time: int) -> None:
        """Delete a processing-time timer of this key and window (no-op if absent)."""

    @abc.abstractmethod
    def delete_event_time_timer(self, time: int) -> None:
        """Delete an event-time timer of this key and window (no-op if absent)."""

    @abc.abstractmethod
    def get_partitioned_state(self, state_descriptor: Any) -> Any:
        """The state of ``state_descriptor`` for the current key and window."""


class OnMergeContext(TriggerContext):
    """The context of ``Trigger.on_merge`` (Flink's ``Trigger.OnMergeContext``)."""

    @abc.abstractmethod
    def merge_partitioned_state(self, state_descriptor: Any) -> None:
        """Merge the state of ``state_descriptor`` (a reducing, aggregating or list state) of
        the merged windows into the new window's.

        :raises ValueError: if the descriptor is not of a mergeable state.
        """


class Trigger(abc.ABC):
    """Base of triggers (Flink's / PyFlink's ``Trigger``); subclass it for a custom trigger.

    ``on_element``, ``on_processing_time`` and ``on_event_time`` return a
    :class:`TriggerResult`. A trigger that works with merging (session) windows returns
    ``True`` from :meth:`can_merge` and re-registers its timers / merges its state in
    :meth:`on_merge`. :meth:`clear` removes everything the trigger keeps for a window.
    """

    TriggerContext = TriggerContext
    OnMergeContext = OnMergeContext

    @abc.abstractmethod
    def on_element(self, element: Any, timestamp: Any, window: Window, ctx: TriggerContext) -> TriggerResult:
        """Called for every element added to ``window`` (``timestamp``: ms or ``None``)."""

    @abc.abstractmethod
    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        """Called when a processing-time timer of ``window`` fires at ``time`` ms."""

    @abc.abstractmethod
    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        """Called when an event-time timer of ``window`` fires at ``time`` ms."""

    def can_merge(self) -> bool:
        """Whether the trigger supports merging windows (default ``False``, as Flink)."""
        return False

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        """Called when windows merged into ``window``.

        :raises NotImplementedError: by default (Flink: "This trigger does not support merging.").
        """
        raise NotImplementedError(f"This trigger does not support merging. ({self!r})")

    @abc.abstractmethod
    def clear(self, window: Window, ctx: TriggerContext) -> None:
        """Remove the trigger's timers and state of ``window``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class EventTimeTrigger(Trigger):
    """Fires once the watermark passes the window's end (Flink's ``EventTimeTrigger``): on
    each element it registers an event-time timer at ``window.max_timestamp()`` (or fires at
    once if the watermark is already past it: a late element within the allowed lateness);
    the timer fires the window. Supports merging."""

    @staticmethod
    def create() -> "EventTimeTrigger":
        """A new ``EventTimeTrigger``."""
        return EventTimeTrigger()

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def clear(self, window, ctx) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx) -> None:
        max_ts = window.max_timestamp()
        if max_ts > ctx.get_current_watermark():
            ctx.register_event_time_timer(max_ts)


class ProcessingTimeTrigger(Trigger):
    """Fires when the processing time reaches the window's end (Flink's
    ``ProcessingTimeTrigger``): a processing-time timer at ``window.max_timestamp()``.
    Supports merging."""

    @staticmethod
    def create() -> "ProcessingTimeTrigger":
        """A new ``ProcessingTimeTrigger``."""
        return ProcessingTimeTrigger()

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        ctx.register_processing_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.FIRE

    def clear(self, window, ctx) -> None:
        ctx.delete_processing_time_timer(window.max_timestamp())

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx) -> None:
        max_ts = window.max_timestamp()
        if max_ts > ctx.get_current_processing_time():
            ctx.register_processing_time_timer(max_ts)


def _sum(a: int, b: int) -> int:
    return a + b


def _min(a: int, b: int) -> int:
    return a if a <= b else b


class CountTrigger(Trigger):
    """Fires each time the window has received ``count`` more elements (Flink's
    ``CountTrigger``): a per-window count in a reducing state ``"count"``, reset on firing.
    Use ``PurgingTrigger.of(CountTrigger.of(n))`` for tumbling count windows. Supports merging
    (counts add up).

    :param count: elements per firing, an ``int`` >= 1.
    :raises ValueError: if ``count < 1`` (Rill difference: Flink accepts it and fires on every
        element).
    """

    def __init__(self, count: int) -> None:
        if type(count) is not int or count < 1:
            raise ValueError(f"CountTrigger count must be an int >= 1, got {count!r}")
        self.count = count
        self.state_descriptor = ReducingStateDescriptor("count", _sum)

    @staticmethod
    def of(count: int) -> "CountTrigger":
        """A trigger firing every ``count`` elements (``count`` >= 1, else ``ValueError``)."""
        return CountTrigger(count)

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        state = ctx.get_partitioned_state(self.state_descriptor)
        state.add(1)
        if state.get() >= self.count:
            state.clear()
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def clear(self, window, ctx) -> None:
        ctx.get_partitioned_state(self.state_descriptor).clear()

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx) -> None:
        ctx.merge_partitioned_state(self.state_descriptor)

    def __repr__(self) -> str:
        return f"CountTrigger({self.count})"


class PurgingTrigger(Trigger):
    """Turns every ``FIRE`` of the nested trigger into ``FIRE_AND_PURGE`` (Flink's
    ``PurgingTrigger``); everything else is delegated.

    :param nested_trigger: a :class:`Trigger`.
    :raises TypeError: if ``nested_trigger`` is not a Trigger.
    """

    def __init__(self, nested_trigger: Trigger) -> None:
        if not isinstance(nested_trigger, Trigger):
            raise TypeError(f"PurgingTrigger wraps a Trigger, got {nested_trigger!r}")
        self.nested_trigger = nested_trigger

    @staticmethod
    def of(nested_trigger: Trigger) -> "PurgingTrigger":
        """``nested_trigger`` with every FIRE turned into FIRE_AND_PURGE."""
        return PurgingTrigger(nested_trigger)

    @staticmethod
    def _purging(result: TriggerResult) -> TriggerResult:
        return TriggerResult.FIRE_AND_PURGE if result.is_fire() else result

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        return self._purging(self.nested_trigger.on_element(element, timestamp, window, ctx))

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return self._purging(self.nested_trigger.on_event_time(time, window, ctx))

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return self._purging(self.nested_trigger.on_processing_time(time, window, ctx))

    def clear(self, window, ctx) -> None:
        self.nested_trigger.clear(window, ctx)

    def can_merge(self) -> bool:
        return self.nested_trigger.can_merge()

    def on_merge(self, window, ctx) -> None:
        self.nested_trigger.on_merge(window, ctx)

    def __repr__(self) -> str:
        return f"PurgingTrigger({self.nested_trigger!r})"


def _interval(interval: Any, owner: str) -> int:
    ms = to_milliseconds(interval, f"{owner} interval")
    if ms <= 0:
        raise ValueError(f"{owner} interval must be > 0 ms, got {ms}")
    return ms


class _ContinuousTrigger(Trigger):
    """What the continuous triggers share: the interval (ms > 0), the next firing time in a
    reducing state ``"fire-time"`` (minimum), clearing and merging it. Subclasses name their
    time domain's ``TriggerContext`` methods in ``_REGISTER_TIMER``/``_DELETE_TIMER``.

    :raises ValueError: if ``interval <= 0``.
    """

    _NAME = "ContinuousTrigger"
    _REGISTER_TIMER = ""
    _DELETE_TIMER = ""

    def __init__(self, interval: Any) -> None:
        self.interval = _interval(interval, self._NAME)
        self.state_descriptor = ReducingStateDescriptor("fire-time", _min)

    def clear(self, window, ctx) -> None:
        state = ctx.get_partitioned_state(self.state_descriptor)
        timestamp = state.get()
        if timestamp is not None:
            getattr(ctx, self._DELETE_TIMER)(timestamp)
            state.clear()

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx) -> None:
        ctx.merge_partitioned_state(self.state_descriptor)
        next_fire = ctx.get_partitioned_state(self.state_descriptor).get()
        if next_fire is not None:
            getattr(ctx, self._REGISTER_TIMER)(next_fire)

    def _register_next_fire_timestamp(self, time: int, window: Window, ctx: TriggerContext, state: Any) -> None:
        next_fire = min(time + self.interval, window.max_timestamp())
        state.add(next_fire)
        getattr(ctx, self._REGISTER_TIMER)(next_fire)

    def __repr__(self) -> str:
        return f"{self._NAME}({self.interval})"


class ContinuousEventTimeTrigger(_ContinuousTrigger):
    """Fires early every ``interval`` ms of event time, and at the window's end (Flink's
    ``ContinuousEventTimeTrigger``). The next firing time (aligned to the interval grid, at
    most ``window.max_timestamp()``) lives in a reducing state ``"fire-time"`` (minimum).
    Supports merging.

    :raises ValueError: if ``interval <= 0``.
    """

    _NAME = "ContinuousEventTimeTrigger"
    _REGISTER_TIMER = "register_event_time_timer"
    _DELETE_TIMER = "delete_event_time_timer"

    @staticmethod
    def of(interval: Any) -> "ContinuousEventTimeTrigger":
        """Fire every ``interval`` ms of event time (ms > 0, else ``ValueError``)."""
        return ContinuousEventTimeTrigger(interval)

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE  # the watermark is past the window: fire at once
        ctx.register_event_time_timer(window.max_timestamp())
        state = ctx.get_partitioned_state(self.state_descriptor)
        if state.get() is None:
            start = timestamp - java_remainder(timestamp, self.interval)
            self._register_next_fire_timestamp(start, window, ctx, state)
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        if time == window.max_timestamp():
            return TriggerResult.FIRE
        state = ctx.get_partitioned_state(self.state_descriptor)
        fire_timestamp = state.get()
        if fire_timestamp is not None and fire_timestamp == time:
            state.clear()
            self._register_next_fire_timestamp(time, window, ctx, state)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE


class ContinuousProcessingTimeTrigger(_ContinuousTrigger):
    """Fires every ``interval`` ms of processing time (Flink's
    ``ContinuousProcessingTimeTrigger``), aligned to the interval grid and capped at the
    window's end; the next firing time lives in a reducing state ``"fire-time"``. Supports
    merging.

    :raises ValueError: if ``interval <= 0``.
    """

    _NAME = "ContinuousProcessingTimeTrigger"
    _REGISTER_TIMER = "register_processing_time_timer"
    _DELETE_TIMER = "delete_processing_time_timer"

    @staticmethod
    def of(interval: Any) -> "ContinuousProcessingTimeTrigger":
        """Fire every ``interval`` ms of processing time (ms > 0, else ``ValueError``)."""
        return ContinuousProcessingTimeTrigger(interval)

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        state = ctx.get_partitioned_state(self.state_descriptor)
        now = ctx.get_current_processing_time()
        if state.get() is None:
            self._register_next_fire_timestamp(now - java_remainder(now, self.interval), window, ctx, state)
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        state = ctx.get_partitioned_state(self.state_descriptor)
        if state.get() == time:
            state.clear()
            self._register_next_fire_timestamp(time, window, ctx, state)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE


class DeltaFunction(abc.ABC):
    """The distance between two elements (Flink's ``DeltaFunction``); a plain callable
    ``(old, new) -> float`` works too."""

    @abc.abstractmethod
    def get_delta(self, old_data_point: Any, new_data_point: Any) -> float:
        """The distance from ``old_data_point`` to ``new_data_point``."""


def delta_callable(delta_function: Any, owner: str) -> Callable[[Any, Any], float]:
    """``delta_function.get_delta`` or the callable itself.

    :raises TypeError: if it is neither (naming ``owner``)."""
    get_delta = getattr(delta_function, "get_delta", None)
    if callable(get_delta):
        return get_delta
    if callable(delta_function):
        return delta_function
    raise TypeError(
        f"{owner} needs a DeltaFunction or a callable (old, new) -> float, got {delta_function!r}"
    )


class DeltaTrigger(Trigger):
    """Fires when the delta between the element and the last element that fired (the first
    element, initially) exceeds ``threshold`` (Flink's ``DeltaTrigger``); that element becomes
    the new reference. The reference lives in a value state ``"last-element"``. Does not
    support merging.

    :param threshold: fire when ``delta > threshold``.
    :param delta_function: a :class:`DeltaFunction` or a callable ``(old, new) -> float``.
    :raises TypeError: for a bad ``delta_function`` or non-numeric ``threshold``.
    """

    def __init__(self, threshold: float, delta_function: Union[DeltaFunction, Callable[[Any, Any], float]]) -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            raise TypeError(f"DeltaTrigger threshold must be a number, got {threshold!r}")
        self.threshold = threshold
        self.delta_function = delta_function
        self._delta = delta_callable(delta_function, "DeltaTrigger")
        self.state_descriptor = ValueStateDescriptor("last-element")

    @staticmethod
    def of(threshold: float, delta_function: Any, state_type_info: Any = None) -> "DeltaTrigger":
        """``state_type_info`` (Flink's state serializer) is accepted and ignored."""
        return DeltaTrigger(threshold, delta_function)

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        state = ctx.get_partitioned_state(self.state_descriptor)
        last = state.value()
        if last is None:
            state.update(element)
            return TriggerResult.CONTINUE
        if self._delta(last, element) > self.threshold:
            state.update(element)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def clear(self, window, ctx) -> None:
        ctx.get_partitioned_state(self.state_descriptor).clear()

    def __repr__(self) -> str:
        return f"DeltaTrigger({self.delta_function!r}, {self.threshold})"


class NeverTrigger(Trigger):
    """Never fires (Flink's ``GlobalWindows.NeverTrigger``): the default trigger of
    ``GlobalWindows``. Supports merging (does nothing)."""

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def clear(self, window, ctx) -> None:
        pass

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx) -> None:
        pass

