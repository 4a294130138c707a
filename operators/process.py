"""``ProcessOperator`` and ``KeyedProcessOperator``: the operators around ``ProcessFunction``
and ``KeyedProcessFunction`` (Flink's classes of the same names,
``org.apache.flink.streaming.api.operators``; PyFlink's operator names ``"Process"`` and
``"KeyedProcess"``).

Outputs follow PyFlink's convention: ``process_element`` and ``on_timer`` yield (or return an
iterable of) output values; a yielded 2-tuple whose first item is an
:class:`~rill.operators.output_tag.OutputTag` goes to that side output instead. Returning
``None`` emits nothing.

Output timestamps follow Flink's ``TimestampedCollector``: records emitted while processing an
element carry its timestamp (or none); records emitted from an event-time timer carry the
timer's timestamp; records emitted from a processing-time timer carry none. Side outputs from
``on_timer`` carry the timer's timestamp in both domains (as Flink's ``OnTimerContext.output``).
Rill difference: a side output of an element without timestamp has no timestamp (Flink stamps
it ``Long.MIN_VALUE``).

Errors raised by the user function propagate unchanged. Within a batch, the main outputs of the
records before the failing one are emitted before the error propagates (side outputs are
emitted as they are yielded), as record-at-a-time processing would have done.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from rill.common.functions import KeyedProcessFunction, ProcessFunction, TimerService
from rill.operators.base import AbstractUdfStreamOperator, Output
from rill.operators.output_tag import OutputTag
from rill.operators.simple import with_key_context
from rill.operators.timer_service import InternalTimer, InternalTimerService, TimeDomain, Triggerable
from rill.common.streamrecord import MIN_TIMESTAMP, Watermark
from rill.state.api import VOID_NAMESPACE

__all__ = [
    "ProcessOperator",
    "KeyedProcessOperator",
    "SimpleTimerService",
    "TimeDomain",
    "UNSUPPORTED_REGISTER_TIMER_MSG",
    "UNSUPPORTED_DELETE_TIMER_MSG",
    "run_process_batch",
    "fire_timer",
]

#: Flink's messages (``ProcessOperator.ContextImpl``).
UNSUPPORTED_REGISTER_TIMER_MSG = "Setting timers is only supported on a keyed streams."
UNSUPPORTED_DELETE_TIMER_MSG = "Deleting timers is only supported on a keyed streams."


def _is_side_output(item: Any) -> bool:
    """PyFlink's convention: a 2-tuple whose first item is an ``OutputTag``."""
    return item.__class__ is tuple and len(item) == 2 and isinstance(item[0], OutputTag)


# -- shared by the process-function operators (also rill.operators.co_operators/broadcast) --

class _TimerServiceMixin:
    """``timer_service()`` of a process-function context; the concrete class declares the
    ``_timer_service`` slot (mixins keep ``__slots__`` empty so they combine with the ABCs)."""

    __slots__ = ()

    def timer_service(self) -> TimerService:
        return self._timer_service


class _ElementContextMixin(_TimerServiceMixin):
    """The context of an element: its timer service and ``timestamp()``, the record's timestamp
    that :func:`run_process_batch` sets. Slots ``_timer_service``, ``_timestamp``."""

    __slots__ = ()

    def __init__(self, timer_service: TimerService) -> None:
        self._timer_service = timer_service
        self._timestamp: Optional[int] = None

    def timestamp(self) -> Optional[int]:
        """The current record's timestamp (epoch ms), or ``None`` if it has none."""
        return self._timestamp


class _KeyedElementContextMixin(_ElementContextMixin):
    """:class:`_ElementContextMixin` plus ``get_current_key()``, the keyed backend's current key.
    Slots ``_timer_service``, ``_timestamp``, ``_backend``."""

    __slots__ = ()

    def __init__(self, timer_service: TimerService, backend: Any) -> None:
        super().__init__(timer_service)
        self._backend = backend

    def get_current_key(self) -> Any:
        return self._backend.get_current_key()


class _OnTimerContextMixin(_TimerServiceMixin):
    """The context of a firing timer (set by :func:`fire_timer`): its timestamp, key and time
    domain. Slots ``_timer_service``, ``_timer``, ``_time_domain``."""

    __slots__ = ()

    def __init__(self, timer_service: TimerService) -> None:
        self._timer_service = timer_service
        self._timer: Optional[InternalTimer] = None
        self._time_domain: Optional[TimeDomain] = None

    def timestamp(self) -> int:
        """The firing timer's timestamp (epoch ms)."""
        return self._timer.timestamp

    def get_current_key(self) -> Any:
        """The firing timer's key."""
        return self._timer.key

    def time_domain(self) -> TimeDomain:
        """``TimeDomain.EVENT_TIME`` or ``TimeDomain.PROCESSING_TIME``."""
        return self._time_domain


def run_process_batch(
    output: Output,
    call: Callable[[Any, Any], Any],
    ctx: Any,
    values: List[Any],
    timestamps: Optional[List[int]],
    key_of: Optional[Callable[[Any], Any]] = None,
    set_key: Optional[Callable[[Any], None]] = None,
) -> None:
    """Run ``call(value, ctx)`` per record of a batch, with ``ctx._timestamp`` set to the
    record's timestamp and, when ``key_of`` is given, ``set_key(key_of(value))`` first.
    Yielded values are emitted as one batch with the records' timestamps; yielded
    ``(OutputTag, value)`` pairs go to side outputs at once. The outputs of the records before a
    failing one are emitted before the error propagates."""
    collect_side = output.collect_side
    out: List[Any] = []
    append = out.append
    out_ts: Optional[List[int]] = None
    try:
        if timestamps is None:
            ctx._timestamp = None
            for value in values:
                if key_of is not None:
                    set_key(key_of(value))
                result = call(value, ctx)
                if result is not None:
                    for item in result:  # _is_side_output, inlined on the hot path
                        if item.__class__ is tuple and len(item) == 2 and isinstance(item[0], OutputTag):
                            collect_side(item[0], item[1], None)
                        else:
                            append(item)
        else:
            out_ts = []
            append_ts = out_ts.append
            for value, t in zip(values, timestamps):
                if key_of is not None:
                    set_key(key_of(value))
                ctx._timestamp = t
                result = call(value, ctx)
                if result is not None:
                    for item in result:
                        if item.__class__ is tuple and len(item) == 2 and isinstance(item[0], OutputTag):
                            collect_side(item[0], item[1], t)
                        else:
                            append(item)
                            append_ts(t)
    finally:
        if out:
            output.collect_batch(out, out_ts)


def fire_timer(output: Output, on_timer: Optional[Callable[[int, Any], Any]], ctx: Any, timer: InternalTimer,
               domain: TimeDomain) -> None:
    """Run ``on_timer(timer.timestamp, ctx)`` (nothing if ``on_timer`` is ``None``) with
    ``ctx._timer``/``ctx._time_domain`` set. Main outputs carry the timer's timestamp for event
    time and none for processing time; side outputs carry the timer's timestamp in both
    domains (Flink's ``OnTimerContextImpl.output``)."""
    if on_timer is None:
        return
    ctx._timer = timer
    ctx._time_domain = domain
    out: List[Any] = []
    try:
        result = on_timer(timer.timestamp, ctx)
        if result is not None:
            collect_side = output.collect_side
            for item in result:
                if item.__class__ is tuple and len(item) == 2 and isinstance(item[0], OutputTag):
                    collect_side(item[0], item[1], timer.timestamp)
                else:
                    out.append(item)
    finally:
        ctx._timer = None
        ctx._time_domain = None
        if out:
            ts = timer.timestamp if domain is TimeDomain.EVENT_TIME else None
            output.collect_batch(out, None if ts is None else [ts] * len(out))


# -- non-keyed ------------------------------------------------------------------------------

class _NonKeyedTimerService(TimerService):
    """Time without timers (Flink's ``ProcessOperator.ContextImpl`` timer methods)."""

    __slots__ = ("_operator",)

    def __init__(self, operator: "ProcessOperator") -> None:
        self._operator = operator

    def current_processing_time(self) -> int:
        return self._operator.context.processing_time_service.get_current_processing_time()

    def current_watermark(self) -> int:
        return self._operator._current_watermark

    def register_processing_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError(UNSUPPORTED_REGISTER_TIMER_MSG)

    def register_event_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError(UNSUPPORTED_REGISTER_TIMER_MSG)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError(UNSUPPORTED_DELETE_TIMER_MSG)

    def delete_event_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError(UNSUPPORTED_DELETE_TIMER_MSG)


class _ProcessContext(_ElementContextMixin, ProcessFunction.Context):
    __slots__ = ("_timer_service", "_timestamp")


class ProcessOperator(AbstractUdfStreamOperator):
    """Runs a ``ProcessFunction`` on a non-keyed stream (Flink's ``ProcessOperator``; PyFlink's
    operator name ``"Process"``).

    ``ctx.timestamp()`` is the record's timestamp or ``None``; ``ctx.timer_service()`` gives
    ``current_processing_time()`` and ``current_watermark()`` (``MIN_TIMESTAMP`` before the
    first watermark); registering or deleting a timer raises ``NotImplementedError`` with
    Flink's message "Setting timers is only supported on a keyed streams."

    :param user_function: a ``ProcessFunction``.
    """

    default_name = "Process"

    def setup(self, context: Any, output: Output) -> None:
        super().setup(context, output)
        self._process = with_key_context(self.user_function.process_element, self.user_function, context)
        self._current_watermark = MIN_TIMESTAMP
        self._ctx = _ProcessContext(_NonKeyedTimerService(self))

    def process_watermark(self, watermark: Watermark) -> None:
        super().process_watermark(watermark)
        self._current_watermark = watermark.timestamp

    def process_element(self, value: Any, timestamp: Optional[int] = None) -> None:
        self.process_batch([value], None if timestamp is None else [timestamp])

    def process_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        run_process_batch(self.output, self._process, self._ctx, values, timestamps)


# -- keyed --------------------------------------------------------------------------------

class SimpleTimerService(TimerService):
    """The user-facing ``TimerService`` of a keyed operator: timers in ``VOID_NAMESPACE`` of an
    ``InternalTimerService``, for the current key (Flink's ``SimpleTimerService``). Times are
    epoch ms."""

    __slots__ = ("_internal",)

    def __init__(self, internal_timer_service: InternalTimerService) -> None:
        self._internal = internal_timer_service

    def current_processing_time(self) -> int:
        return self._internal.current_processing_time()

    def current_watermark(self) -> int:
        return self._internal.current_watermark()

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._internal.register_processing_time_timer(VOID_NAMESPACE, timestamp)

    def register_event_time_timer(self, timestamp: int) -> None:
        self._internal.register_event_time_timer(VOID_NAMESPACE, timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._internal.delete_processing_time_timer(VOID_NAMESPACE, timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._internal.delete_event_time_timer(VOID_NAMESPACE, timestamp)


class _KeyedContext(_KeyedElementContextMixin, KeyedProcessFunction.Context):
    __slots__ = ("_timer_service", "_timestamp", "_backend")


class _OnTimerContext(_OnTimerContextMixin, KeyedProcessFunction.OnTimerContext):
    __slots__ = ("_timer_service", "_timer", "_time_domain")


class KeyedProcessOperator(AbstractUdfStreamOperator, Triggerable):
    """Runs a ``KeyedProcessFunction`` on a keyed stream (Flink's ``KeyedProcessOperator``;
    PyFlink's operator name ``"KeyedProcess"``).

    Per record it sets the backend's current key from the state key selector
    (``context.key_selector``), so keyed state and timers are scoped to that key;
    ``ctx.get_current_key()`` returns it. Timers live in the internal timer service
    ``"user-timers"``; ``on_timer(timestamp, ctx)`` runs with the timer's key current and
    ``ctx.time_domain()`` telling ``EVENT_TIME`` from ``PROCESSING_TIME``.

    :param user_function: a ``KeyedProcessFunction``.
    :raises RuntimeError: at ``open`` if the operator has no keyed state backend, key selector
        or timer service manager (it is not on a keyed stream).
    :raises UnsupportedKeyError: (a ``TypeError``) for a key without a stable hash.
    """

    default_name = "KeyedProcess"
    TIMER_SERVICE_NAME = "user-timers"

    def open(self) -> None:
        context = self.context
        backend = context.keyed_state_backend
        if backend is None or context.key_selector is None or context.timer_service_manager is None:
            raise RuntimeError(
                f"Operator '{context.operator_name}' ({type(self).__name__}) runs a "
                "KeyedProcessFunction and needs a keyed stream: key_by() must come before process()"
            )
        selector = context.key_selector
        self._key_of = getattr(selector, "get_key", selector)
        self._backend = backend
        self._set_key = backend.set_current_key
        internal = context.timer_service_manager.get_internal_timer_service(self.TIMER_SERVICE_NAME, self)
        self._internal_timer_service = internal
        timer_service = SimpleTimerService(internal)
        self._ctx = _KeyedContext(timer_service, backend)
        self._on_timer_ctx = _OnTimerContext(timer_service)
        self._process = self.user_function.process_element
        self._on_timer = self.user_function.on_timer
        super().open()

    def process_element(self, value: Any, timestamp: Optional[int] = None) -> None:
        self.process_batch([value], None if timestamp is None else [timestamp])

    def process_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        run_process_batch(self.output, self._process, self._ctx, values, timestamps, self._key_of, self._set_key)

    # -- Triggerable ------------------------------------------------------------------------
    def on_event_time(self, timer: InternalTimer) -> None:
        fire_timer(self.output, self._on_timer, self._on_timer_ctx, timer, TimeDomain.EVENT_TIME)

    def on_processing_time(self, timer: InternalTimer) -> None:
        fire_timer(self.output, self._on_timer, self._on_timer_ctx, timer, TimeDomain.PROCESSING_TIME)
