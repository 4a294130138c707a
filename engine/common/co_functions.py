"""User function interfaces of two-input operations, with PyFlink's names and signatures
(``pyflink.datastream.functions``; Flink's ``org.apache.flink.streaming.api.functions.co``).

- :class:`CoMapFunction`, :class:`CoFlatMapFunction`: ``ConnectedStreams.map`` / ``flat_map``.
- :class:`CoProcessFunction`, :class:`KeyedCoProcessFunction`: ``ConnectedStreams.process``.
- :class:`BroadcastProcessFunction`, :class:`KeyedBroadcastProcessFunction`:
  ``BroadcastConnectedStream.process`` (broadcast state pattern).
- :class:`ProcessJoinFunction`: ``IntervalJoined.process`` (interval join).

Outputs follow PyFlink's convention: a method ``yield`` s (or returns an iterable of) output
values; a yielded 2-tuple ``(output_tag, value)`` whose first item is an ``OutputTag`` goes to that
side output. ``map1``/``map2`` return exactly one value.

Times are epoch milliseconds. Contexts are only valid during the call they are passed to: do not
store them.
"""

from __future__ import annotations

import abc
from typing import Any, Callable, Generic, Iterable, Optional

from rill.common.functions import IN1, IN2, KEY, OUT, Function, TimerService

__all__ = [
    "CoMapFunction",
    "CoFlatMapFunction",
    "CoProcessFunction",
    "KeyedCoProcessFunction",
    "BaseBroadcastProcessFunction",
    "BroadcastProcessFunction",
    "KeyedBroadcastProcessFunction",
    "ProcessJoinFunction",
]


class CoMapFunction(Function, Generic[IN1, IN2, OUT]):
    """A map over two connected streams (Flink's ``CoMapFunction``). The same instance serves
    both inputs, so the two can share state."""

    @abc.abstractmethod
    def map1(self, value: Any) -> Any:
        """Called for each element of the first input; returns one output value."""

    @abc.abstractmethod
    def map2(self, value: Any) -> Any:
        """Called for each element of the second input; returns one output value."""


class CoFlatMapFunction(Function, Generic[IN1, IN2, OUT]):
    """A flat map over two connected streams (Flink's ``CoFlatMapFunction``)."""

    @abc.abstractmethod
    def flat_map1(self, value: Any) -> Optional[Iterable[Any]]:
        """Called for each element of the first input; yields zero or more output values."""

    @abc.abstractmethod
    def flat_map2(self, value: Any) -> Optional[Iterable[Any]]:
        """Called for each element of the second input; yields zero or more output values."""


class CoProcessFunction(Function, Generic[IN1, IN2, OUT]):
    """Processes the elements of two streams (Flink's ``CoProcessFunction``). On non-keyed
    connected streams the context gives time but no timers (registering one raises
    ``NotImplementedError``); on keyed connected streams it runs with keyed state and timers
    (Flink's ``LegacyKeyedCoProcessOperator``)."""

    class Context(abc.ABC):
        @abc.abstractmethod
        def timer_service(self) -> TimerService:
            """Time queries (and timers on keyed connected streams)."""

        @abc.abstractmethod
        def timestamp(self) -> Optional[int]:
            """The current element's timestamp (ms), or ``None`` if it has none."""

    @abc.abstractmethod
    def process_element1(self, value: Any, ctx: "CoProcessFunction.Context") -> Optional[Iterable[Any]]:
        """Called for each element of the first input."""

    @abc.abstractmethod
    def process_element2(self, value: Any, ctx: "CoProcessFunction.Context") -> Optional[Iterable[Any]]:
        """Called for each element of the second input."""


class KeyedCoProcessFunction(Function, Generic[KEY, IN1, IN2, OUT]):
    """Processes the elements of two keyed streams with keyed state and timers (Flink's
    ``KeyedCoProcessFunction``). State and timers are scoped to the key of the current element
    (the first input's key selector for input 1, the second's for input 2)."""

    class Context(abc.ABC):
        @abc.abstractmethod
        def get_current_key(self) -> Any:
            """The key of the current element (or of the firing timer)."""

        @abc.abstractmethod
        def timer_service(self) -> TimerService:
            """Time queries and timers of the current key."""

        @abc.abstractmethod
        def timestamp(self) -> Optional[int]:
            """The current element's timestamp (ms) or ``None``; in ``on_timer`` the timer's."""

    class OnTimerContext(Context):
        @abc.abstractmethod
        def time_domain(self) -> Any:
            """``TimeDomain.EVENT_TIME`` or ``TimeDomain.PROCESSING_TIME``."""

    @abc.abstractmethod
    def process_element1(self, value: Any, ctx: "KeyedCoProcessFunction.Context") -> Optional[Iterable[Any]]:
        """Called for each element of the first input, with its key current."""

    @abc.abstractmethod
    def process_element2(self, value: Any, ctx: "KeyedCoProcessFunction.Context") -> Optional[Iterable[Any]]:
        """Called for each element of the second input, with its key current."""

    def on_timer(self, timestamp: int, ctx: "KeyedCoProcessFunction.OnTimerContext") -> Optional[Iterable[Any]]:
        """Called when a timer fires, with the timer's key current."""


class BaseBroadcastProcessFunction(Function):
    """What both broadcast process functions share (Flink's ``BaseBroadcastProcessFunction``)."""

    class BaseContext(abc.ABC):
        @abc.abstractmethod
        def timestamp(self) -> Optional[int]:
            """The current element's timestamp (ms) or ``None``; in ``on_timer`` the timer's."""

        @abc.abstractmethod
        def current_processing_time(self) -> int:
            """The task's processing time, ms."""

        @abc.abstractmethod
        def current_watermark(self) -> int:
            """The operator's current watermark, ms (``MIN_TIMESTAMP`` before the first)."""

    class Context(BaseContext):
        """The broadcast side's context: read-write access to the broadcast state."""

        @abc.abstractmethod
        def get_broadcast_state(self, state_descriptor: Any) -> Any:
            """The ``BroadcastState`` of ``state_descriptor`` (a ``MapStateDescriptor`` given to
            ``DataStream.broadcast``).

            :raises ValueError: if the descriptor was not given to ``broadcast``.
            """

    class ReadOnlyContext(BaseContext):
        """The non-broadcast side's context: read-only access to the broadcast state."""

        @abc.abstractmethod
        def get_broadcast_state(self, state_descriptor: Any) -> Any:
            """A ``ReadOnlyBroadcastState`` view: reads work, writes raise ``TypeError``.

            :raises ValueError: if the descriptor was not given to ``broadcast``.
            """


class BroadcastProcessFunction(BaseBroadcastProcessFunction, Generic[IN1, IN2, OUT]):
    """Connects a non-keyed stream with a broadcast stream (Flink's
    ``BroadcastProcessFunction``): every parallel instance sees every broadcast element in
    :meth:`process_broadcast_element` and may write the broadcast state there; the elements of
    the other stream see it read-only in :meth:`process_element`.

    Every instance must apply the same update to the broadcast state for each broadcast element
    (the state is expected to be identical on all subtasks, as in Flink).
    """

    class Context(BaseBroadcastProcessFunction.Context):
        pass

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext):
        pass

    @abc.abstractmethod
    def process_element(self, value: Any, ctx: "BroadcastProcessFunction.ReadOnlyContext") -> Optional[Iterable[Any]]:
        """Called for each element of the non-broadcast stream."""

    @abc.abstractmethod
    def process_broadcast_element(self, value: Any, ctx: "BroadcastProcessFunction.Context") -> Optional[Iterable[Any]]:
        """Called for each element of the broadcast stream, on every subtask."""


class KeyedBroadcastProcessFunction(BaseBroadcastProcessFunction, Generic[KEY, IN1, IN2, OUT]):
    """Connects a keyed stream with a broadcast stream (Flink's
    ``KeyedBroadcastProcessFunction``): :meth:`process_element` has keyed state, timers and a
    read-only broadcast state; :meth:`process_broadcast_element` may write the broadcast state
    and reach every key's state through ``ctx.apply_to_keyed_state``; :meth:`on_timer` runs
    when a timer of the keyed side fires.
    """

    class Context(BaseBroadcastProcessFunction.Context):
        @abc.abstractmethod
        def apply_to_keyed_state(self, state_descriptor: Any, function: Callable[[Any, Any], None]) -> None:
            """Call ``function(key, state)`` for every key of this subtask that has an entry in
            the keyed state of ``state_descriptor`` (Flink's ``applyToKeyedState``); the
            function may read, update or clear the state."""

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext):
        @abc.abstractmethod
        def timer_service(self) -> TimerService:
            """Time queries and timers of the current key."""

        @abc.abstractmethod
        def get_current_key(self) -> Any:
            """The key of the current element."""

    class OnTimerContext(ReadOnlyContext):
        @abc.abstractmethod
        def time_domain(self) -> Any:
            """``TimeDomain.EVENT_TIME`` or ``TimeDomain.PROCESSING_TIME``."""

        @abc.abstractmethod
        def get_current_key(self) -> Any:
            """The key of the firing timer."""

    @abc.abstractmethod
    def process_element(self, value: Any, ctx: "KeyedBroadcastProcessFunction.ReadOnlyContext") -> Optional[Iterable[Any]]:
        """Called for each element of the keyed stream, with its key current."""

    @abc.abstractmethod
    def process_broadcast_element(self, value: Any, ctx: "KeyedBroadcastProcessFunction.Context") -> Optional[Iterable[Any]]:
        """Called for each element of the broadcast stream, on every subtask (no current key)."""

    def on_timer(self, timestamp: int, ctx: "KeyedBroadcastProcessFunction.OnTimerContext") -> Optional[Iterable[Any]]:
        """Called when a timer fires, with the timer's key current."""


class ProcessJoinFunction(Function, Generic[IN1, IN2, OUT]):
    """Processes the joined pairs of an interval join (Flink's ``ProcessJoinFunction``)."""

    class Context(abc.ABC):
        @abc.abstractmethod
        def get_left_timestamp(self) -> int:
            """The left element's timestamp, ms."""

        @abc.abstractmethod
        def get_right_timestamp(self) -> int:
            """The right element's timestamp, ms."""

        @abc.abstractmethod
        def get_timestamp(self) -> int:
            """The output's timestamp: ``max(left, right)``, ms."""

    @abc.abstractmethod
    def process_element(self, left: Any, right: Any, ctx: "ProcessJoinFunction.Context") -> Optional[Iterable[Any]]:
        """Called once per joined pair; yields zero or more outputs (or ``(tag, value)``)."""
