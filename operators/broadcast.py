"""Operators of the broadcast state pattern: ``CoBroadcastWithNonKeyedOperator`` and
``CoBroadcastWithKeyedOperator`` (Flink's classes of the same names,
``org.apache.flink.streaming.api.operators.co``; operator names ``"Co-Process-Broadcast"`` and
``"Co-Process-Broadcast-Keyed"``).

Input 1 is the non-broadcast stream (forwarded or rebalanced, or hash-partitioned when keyed);
input 2 is the broadcast stream, which reaches every subtask through the BROADCAST partitioner.
For each ``MapStateDescriptor`` given to ``DataStream.broadcast`` the operator holds one
broadcast state in its operator state backend (``rill.state.operator_state``; snapshotted as
``BROADCAST`` operator state: every new subtask restores one copy):

- ``process_broadcast_element(value, ctx)`` (input 2) gets read-write access:
  ``ctx.get_broadcast_state(descriptor)`` is a ``BroadcastState``;
- ``process_element(value, ctx)`` (input 1) and ``on_timer`` get a read-only view: reads see
  the current mappings, ``put``/``put_all``/``remove``/``clear`` raise ``TypeError``.

``get_broadcast_state`` with a descriptor not given to ``broadcast`` raises ``ValueError`` with
Flink's message. Both contexts give ``timestamp()`` (the element's, ms, or ``None``),
``current_processing_time()`` and ``current_watermark()`` (the combined watermark of both
inputs). Outputs follow :mod:`rill.operators.co_operators` (timestamps of the input element,
``(OutputTag, value)`` side outputs).

Keyed variant: ``process_element`` runs with the element's key current (keyed state through the
runtime context, ``ctx.get_current_key()``, ``ctx.timer_service()`` with timers); the broadcast
side has no current key, and ``ctx.apply_to_keyed_state(descriptor, function)`` calls
``function(key, state)`` for every key of the subtask with an entry in that keyed state.

The order in which a subtask sees broadcast and non-broadcast elements is not defined (as in
Flink): the user function must not depend on it.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

from rill.common.co_functions import BroadcastProcessFunction, KeyedBroadcastProcessFunction
from rill.operators.co_operators import AbstractUdfTwoInputStreamOperator, fire_timer, run_process_batch
from rill.operators.process import SimpleTimerService, _OnTimerContextMixin, _TimerServiceMixin
from rill.operators.timer_service import InternalTimer, TimeDomain, Triggerable
from rill.state.api import VOID_NAMESPACE
from rill.state.descriptors import MapStateDescriptor
from rill.state.operator_state import ReadOnlyBroadcastStateView

__all__ = [
    "CoBroadcastWithNonKeyedOperator",
    "CoBroadcastWithKeyedOperator",
    "ReadOnlyBroadcastStateGuard",
    "check_broadcast_state_descriptors",
    "UNKNOWN_BROADCAST_STATE_MSG",
]

#: Flink's message (``CoBroadcastWithNonKeyedOperator.ReadWriteContextImpl.getBroadcastState``).
UNKNOWN_BROADCAST_STATE_MSG = (
    "The requested state does not exist. Check for typos in your state descriptor, or specify "
    "the state descriptor in the datastream.broadcast(...) call if you forgot to register it."
)


def check_broadcast_state_descriptors(descriptors: Sequence[Any], api_call: str) -> List[MapStateDescriptor]:
    """The descriptors as a list.

    :raises ValueError: if there are none.
    :raises TypeError: naming ``api_call`` and the value, for one that is not a
        ``MapStateDescriptor``.
    """
    if not descriptors:
        raise ValueError(f"{api_call}: a broadcast stream needs at least one MapStateDescriptor")
    for d in descriptors:
        if not isinstance(d, MapStateDescriptor):
            raise TypeError(
                f"{api_call}: broadcast state must be described by MapStateDescriptors, got {d!r} "
                f"of type {type(d).__name__}"
            )
    return list(descriptors)


class ReadOnlyBroadcastStateGuard(ReadOnlyBroadcastStateView):
    """The read-only broadcast state of the non-broadcast side: a ``ReadOnlyBroadcastStateView``
    whose write methods raise ``TypeError`` naming the state and the operator (Flink raises
    ``UnsupportedOperationException("ReadOnlyBroadcastState does not allow modify operation")``).

    :param state: the operator's ``HeapBroadcastState``.
    :param operator_name: named in the error.
    """

    __slots__ = ("_operator_name",)

    def __init__(self, state: Any, operator_name: str) -> None:
        super().__init__(state)
        self._operator_name = operator_name

    def _refuse(self, what: str) -> None:
        raise TypeError(
            f"ReadOnlyBroadcastState does not allow modify operation: {what} on broadcast state "
            f"'{self._state.name}' of operator '{self._operator_name}'; only "
            "process_broadcast_element may write the broadcast state"
        )

    def put(self, key: Any, value: Any) -> None:
        """:raises TypeError: always."""
        self._refuse("put()")

    def put_all(self, dict_value: Any) -> None:
        """:raises TypeError: always."""
        self._refuse("put_all()")

    def remove(self, key: Any) -> None:
        """:raises TypeError: always."""
        self._refuse("remove()")

    def clear(self) -> None:
        """:raises TypeError: always."""
        self._refuse("clear()")

    def __setitem__(self, key: Any, value: Any) -> None:
        self._refuse("item assignment")

    def __delitem__(self, key: Any) -> None:
        self._refuse("item deletion")


class _BaseBroadcastOperator(AbstractUdfTwoInputStreamOperator):
    """Holds the broadcast states (read-write and read-only, by descriptor name)."""

    def __init__(self, user_function: Any, broadcast_state_descriptors: Sequence[MapStateDescriptor]) -> None:
        super().__init__(user_function)
        self.broadcast_state_descriptors = check_broadcast_state_descriptors(
            broadcast_state_descriptors, type(self).__name__)

    def open(self) -> None:
        backend = self.operator_state_backend
        name = self.context.operator_name
        self._rw_states: Dict[str, Any] = {}
        self._ro_states: Dict[str, Any] = {}
        for d in self.broadcast_state_descriptors:
            state = backend.get_broadcast_state(d)
            self._rw_states[d.name] = state
            self._ro_states[d.name] = ReadOnlyBroadcastStateGuard(state, name)
        super().open()

    def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> Any:
        """The read-write broadcast state (for tests and snapshots).

        :raises ValueError: if the descriptor is not one of the operator's.
        """
        return _lookup(self._rw_states, state_descriptor)


def _lookup(states: Dict[str, Any], descriptor: Any) -> Any:
    state = states.get(getattr(descriptor, "name", None))
    if state is None or not isinstance(descriptor, MapStateDescriptor):
        raise ValueError(f"{UNKNOWN_BROADCAST_STATE_MSG} (descriptor {descriptor!r}; registered: {sorted(states)})")
    return state


class _Context:
    """Base of the contexts: time and broadcast state look-up (read-write or read-only)."""

    __slots__ = ("_operator", "_states", "_timestamp")

    def __init__(self, operator: _BaseBroadcastOperator, states: Dict[str, Any]) -> None:
        self._operator = operator
        self._states = states
        self._timestamp: Optional[int] = None

    def timestamp(self) -> Optional[int]:
        """The current element's timestamp (epoch ms), or ``None`` if it has none."""
        return self._timestamp

    def current_processing_time(self) -> int:
        return self._operator.context.processing_time_service.get_current_processing_time()

    def current_watermark(self) -> int:
        return self._operator._current_watermark

    def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> Any:
        """The broadcast state of ``state_descriptor``.

        :raises ValueError: if it was not given to ``DataStream.broadcast``.
        """
        return _lookup(self._states, state_descriptor)


class _NonKeyedReadWriteContext(_Context, BroadcastProcessFunction.Context):
    __slots__ = ()


class _NonKeyedReadOnlyContext(_Context, BroadcastProcessFunction.ReadOnlyContext):
    __slots__ = ()


class CoBroadcastWithNonKeyedOperator(_BaseBroadcastOperator):
    """Runs a ``BroadcastProcessFunction`` (Flink's ``CoBroadcastWithNonKeyedOperator``;
    operator name ``"Co-Process-Broadcast"``): input 1 → ``process_element`` with a read-only
    context, input 2 (broadcast) → ``process_broadcast_element`` with a read-write context.

    :param user_function: a ``BroadcastProcessFunction``.
    :param broadcast_state_descriptors: the ``MapStateDescriptor`` s given to ``broadcast``.
    :raises ValueError, TypeError: if there is no descriptor or one is not a
        ``MapStateDescriptor``.
    """

    default_name = "Co-Process-Broadcast"

    def open(self) -> None:
        super().open()
        self._ro_ctx = _NonKeyedReadOnlyContext(self, self._ro_states)
        self._rw_ctx = _NonKeyedReadWriteContext(self, self._rw_states)
        self._process = self.user_function.process_element
        self._process_broadcast = self.user_function.process_broadcast_element

    def process_batch1(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        run_process_batch(self.output, self._process, self._ro_ctx, values, timestamps)

    def process_batch2(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        run_process_batch(self.output, self._process_broadcast, self._rw_ctx, values, timestamps)


# -- keyed ----------------------------------------------------------------------------------------

class _KeyedReadWriteContext(_Context, KeyedBroadcastProcessFunction.Context):
    __slots__ = ()

    def apply_to_keyed_state(self, state_descriptor: Any, function: Callable[[Any, Any], None]) -> None:
        """Call ``function(key, state)`` (or ``function.process(key, state)``, Flink's
        ``KeyedStateFunction``) for every key of this subtask with an entry in the keyed state
        of ``state_descriptor``, with that key current; the previous key is restored afterwards.

        :raises TypeError: if ``function`` is not callable and has no ``process``.
        """
        fn = getattr(function, "process", function)
        if not callable(fn):
            raise TypeError(
                f"apply_to_keyed_state expects a callable (key, state) -> None, got {function!r} "
                f"(operator '{self._operator.context.operator_name}')"
            )
        self._operator.context.keyed_state_backend.apply_to_all_keys(VOID_NAMESPACE, state_descriptor, fn)


class _KeyedReadOnlyContext(_TimerServiceMixin, _Context, KeyedBroadcastProcessFunction.ReadOnlyContext):
    __slots__ = ("_timer_service",)

    def __init__(self, operator: _BaseBroadcastOperator, states: Dict[str, Any], timer_service: Any) -> None:
        _Context.__init__(self, operator, states)
        self._timer_service = timer_service

    def get_current_key(self) -> Any:
        return self._operator.context.keyed_state_backend.get_current_key()


class _KeyedOnTimerContext(_OnTimerContextMixin, _Context, KeyedBroadcastProcessFunction.OnTimerContext):
    """The firing timer's timestamp, key and time domain, and the read-only broadcast states."""

    __slots__ = ("_timer_service", "_timer", "_time_domain")

    def __init__(self, operator: _BaseBroadcastOperator, states: Dict[str, Any], timer_service: Any) -> None:
        _Context.__init__(self, operator, states)
        _OnTimerContextMixin.__init__(self, timer_service)


class CoBroadcastWithKeyedOperator(_BaseBroadcastOperator, Triggerable):
    """Runs a ``KeyedBroadcastProcessFunction`` (Flink's ``CoBroadcastWithKeyedOperator``;
    operator name ``"Co-Process-Broadcast-Keyed"``). Input 1 is keyed by
    ``context.key_selector``; timers live in the internal timer service ``"user-timers"`` and
    fire when the combined watermark passes them (event time) or the clock reaches them
    (processing time), with their key current.

    :param user_function: a ``KeyedBroadcastProcessFunction``.
    :param broadcast_state_descriptors: the ``MapStateDescriptor`` s given to ``broadcast``.
    :raises RuntimeError: at ``open``, naming the operator, if input 1 is not keyed.
    """

    default_name = "Co-Process-Broadcast-Keyed"
    TIMER_SERVICE_NAME = "user-timers"

    def open(self) -> None:
        self._require_keyed("KeyedBroadcastProcessFunction", inputs=1)
        super().open()
        context = self.context
        internal = context.timer_service_manager.get_internal_timer_service(self.TIMER_SERVICE_NAME, self)
        timer_service = SimpleTimerService(internal)
        self._ro_ctx = _KeyedReadOnlyContext(self, self._ro_states, timer_service)
        self._rw_ctx = _KeyedReadWriteContext(self, self._rw_states)
        self._on_timer_ctx = _KeyedOnTimerContext(self, self._ro_states, timer_service)
        selector = context.key_selector
        self._key_of = getattr(selector, "get_key", selector)
        self._set_key = context.keyed_state_backend.set_current_key
        fn = self.user_function
        self._process = fn.process_element
        self._process_broadcast = fn.process_broadcast_element
        self._on_timer = getattr(fn, "on_timer", None)

    def process_batch1(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        run_process_batch(self.output, self._process, self._ro_ctx, values, timestamps, self._key_of, self._set_key)

    def process_batch2(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        run_process_batch(self.output, self._process_broadcast, self._rw_ctx, values, timestamps)

    # -- Triggerable ------------------------------------------------------------------------
    def on_event_time(self, timer: InternalTimer) -> None:
        fire_timer(self.output, self._on_timer, self._on_timer_ctx, timer, TimeDomain.EVENT_TIME)

    def on_processing_time(self, timer: InternalTimer) -> None:
        fire_timer(self.output, self._on_timer, self._on_timer_ctx, timer, TimeDomain.PROCESSING_TIME)
