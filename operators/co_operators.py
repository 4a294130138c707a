"""Operators of ``ConnectedStreams``: ``CoStreamMap``, ``CoStreamFlatMap``,
``CoProcessOperator`` and ``KeyedCoProcessOperator`` (Flink's classes of the same names in
``org.apache.flink.streaming.api.operators.co``; operator names ``"Co-Map"``,
``"Co-Flat Map"``, ``"Co-Process"``, ``"Keyed Co-Process"``), plus the helpers the other
two-input operators (:mod:`rill.operators.broadcast`, :mod:`rill.operators.interval_join`)
share (``run_process_batch`` and ``fire_timer`` live in :mod:`rill.operators.process` and are
re-exported here).

Both inputs arrive through ``process_batch1``/``process_batch2`` (or the per-record
``process_element1``/``process_element2``) with the batch convention of
:mod:`rill.operators.base`; the operator's watermark is the minimum of its two inputs'
watermarks (:class:`~rill.operators.base.AbstractTwoInputStreamOperator`).

Output timestamps follow Flink's ``TimestampedCollector``: outputs of an element carry its
timestamp (or none); outputs of an event-time timer carry the timer's timestamp, of a
processing-time timer none; side outputs of a timer carry the timer's timestamp in both
domains. Side outputs: a yielded ``(OutputTag, value)`` 2-tuple (PyFlink's convention) in the
process functions.

On keyed connected streams (``context.key_selector``/``key_selector2`` set) the key of every
record is set as the backend's current key before the function runs, from the first input's
selector for input 1 and the second's for input 2 (Flink's ``setKeyContextElement1/2``). For
``CoStreamMap``/``CoStreamFlatMap`` this is done only for rich functions (overriding ``open``),
as :func:`rill.operators.simple.with_key_context` does.

Errors raised by the user function propagate unchanged; outputs of the records before the
failing one are emitted first.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from rill.common.co_functions import CoProcessFunction, KeyedCoProcessFunction
from rill.operators.simple import with_key_context
from rill.operators.base import AbstractTwoInputStreamOperator, AbstractUdfStreamOperator, Output
from rill.operators.process import (
    SimpleTimerService,
    _ElementContextMixin,
    _KeyedElementContextMixin,
    _NonKeyedTimerService,
    _OnTimerContextMixin,
    fire_timer,
    run_process_batch,
)
from rill.operators.timer_service import InternalTimer, TimeDomain, Triggerable
from rill.common.streamrecord import MIN_TIMESTAMP, Watermark

__all__ = [
    "AbstractUdfTwoInputStreamOperator",
    "CoStreamMap",
    "CoStreamFlatMap",
    "CoProcessOperator",
    "KeyedCoProcessOperator",
    "run_process_batch",
    "fire_timer",
]


class AbstractUdfTwoInputStreamOperator(AbstractUdfStreamOperator, AbstractTwoInputStreamOperator):
    """A two-input operator around one user function (Flink's ``AbstractUdfStreamOperator``
    with a ``TwoInputStreamOperator``): opens the function with the subtask's
    ``RuntimeContext`` and closes it with the operator; watermarks of the two inputs are
    combined by :class:`AbstractTwoInputStreamOperator` and reach :meth:`process_watermark`,
    which advances the keyed timers (if any), records the watermark and forwards it.

    :param user_function: the function object.
    """

    _current_watermark: int = MIN_TIMESTAMP

    def process_watermark(self, watermark: Watermark) -> None:
        self._current_watermark = watermark.timestamp
        super().process_watermark(watermark)

    def _require_keyed(self, function_kind: str, inputs: int = 2) -> None:
        """:raises RuntimeError: naming the operator, unless it is on keyed connected streams."""
        ctx = self.context
        keyed = ctx.keyed_state_backend is not None and ctx.timer_service_manager is not None
        keyed = keyed and ctx.key_selector is not None and (inputs == 1 or ctx.key_selector2 is not None)
        if not keyed:
            where = ("keyed connected streams: key_by() both inputs (or ConnectedStreams.key_by) "
                     "before process()") if inputs == 2 else "a keyed stream: key_by() before connect()"
            raise RuntimeError(
                f"Operator '{ctx.operator_name}' ({type(self).__name__}) runs a {function_kind} and "
                f"needs {where}"
            )


def _key_of(selector: Any) -> Callable[[Any], Any]:
    return getattr(selector, "get_key", selector)


# -- map, flat map ------------------------------------------------------------------------------

class CoStreamMap(AbstractUdfTwoInputStreamOperator):
    """Applies a ``CoMapFunction``: ``map1`` to input 1, ``map2`` to input 2 (Flink's
    ``CoStreamMap``; operator name ``"Co-Map"``). Outputs keep their input's timestamp.

    :param user_function: a ``CoMapFunction``.
    """

    default_name = "Co-Map"

    def setup(self, context: Any, output: Output) -> None:
        super().setup(context, output)
        fn = self.user_function
        self._map1 = with_key_context(fn.map1, fn, context, context.key_selector)
        self._map2 = with_key_context(fn.map2, fn, context, context.key_selector2)

    def process_batch1(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        self._map_batch(self._map1, values, timestamps)

    def process_batch2(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        self._map_batch(self._map2, values, timestamps)

    def _map_batch(self, fn: Callable[[Any], Any], values: List[Any], timestamps: Optional[List[int]]) -> None:
        out: List[Any] = []
        try:
            out.extend(map(fn, values))  # keeps the prefix if fn raises
        finally:
            if out:
                self.output.collect_batch(out, None if timestamps is None else timestamps[: len(out)])


class CoStreamFlatMap(AbstractUdfTwoInputStreamOperator):
    """Applies a ``CoFlatMapFunction``: ``flat_map1`` to input 1, ``flat_map2`` to input 2
    (Flink's ``CoStreamFlatMap``; operator name ``"Co-Flat Map"``). Every output carries its
    input's timestamp; returning ``None`` emits nothing.

    :param user_function: a ``CoFlatMapFunction``.
    """

    default_name = "Co-Flat Map"

    def setup(self, context: Any, output: Output) -> None:
        super().setup(context, output)
        fn = self.user_function
        self._flat_map1 = with_key_context(fn.flat_map1, fn, context, context.key_selector)
        self._flat_map2 = with_key_context(fn.flat_map2, fn, context, context.key_selector2)

    def process_batch1(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        self._flat_map_batch(self._flat_map1, values, timestamps)

    def process_batch2(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        self._flat_map_batch(self._flat_map2, values, timestamps)

    def _flat_map_batch(self, fn: Callable[[Any], Any], values: List[Any], timestamps: Optional[List[int]]) -> None:
        out: List[Any] = []
        out_ts: Optional[List[int]] = None if timestamps is None else []
        try:
            for i, value in enumerate(values):
                result = fn(value)
                if result is None:
                    continue
                before = len(out)
                try:
                    out.extend(result)
                finally:
                    if out_ts is not None:
                        out_ts += [timestamps[i]] * (len(out) - before)
        finally:
            if out:
                self.output.collect_batch(out, out_ts)


# -- process ------------------------------------------------------------------------------------

class _CoProcessContext(_ElementContextMixin, CoProcessFunction.Context):
    """``CoProcessFunction.Context``."""

    __slots__ = ("_timer_service", "_timestamp")


class CoProcessOperator(AbstractUdfTwoInputStreamOperator):
    """Runs a ``CoProcessFunction`` on non-keyed connected streams (Flink's
    ``CoProcessOperator``; operator name ``"Co-Process"``).

    ``ctx.timestamp()`` is the record's timestamp or ``None``; ``ctx.timer_service()`` gives
    ``current_processing_time()`` and ``current_watermark()`` (the combined watermark of both
    inputs, ``MIN_TIMESTAMP`` before the first); registering or deleting a timer raises
    ``NotImplementedError`` with Flink's message "Setting timers is only supported on a keyed
    streams."

    :param user_function: a ``CoProcessFunction``.
    """

    default_name = "Co-Process"

    def setup(self, context: Any, output: Output) -> None:
        super().setup(context, output)
        self._ctx = _CoProcessContext(_NonKeyedTimerService(self))
        self._process1 = self.user_function.process_element1
        self._process2 = self.user_function.process_element2

    def process_batch1(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        run_process_batch(self.output, self._process1, self._ctx, values, timestamps)

    def process_batch2(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        run_process_batch(self.output, self._process2, self._ctx, values, timestamps)


class _KeyedCoContext(_KeyedElementContextMixin, KeyedCoProcessFunction.Context):
    """``KeyedCoProcessFunction.Context``."""

    __slots__ = ("_timer_service", "_timestamp", "_backend")


class _KeyedCoOnTimerContext(_OnTimerContextMixin, KeyedCoProcessFunction.OnTimerContext):
    """``KeyedCoProcessFunction.OnTimerContext``."""

    __slots__ = ("_timer_service", "_timer", "_time_domain")


class KeyedCoProcessOperator(AbstractUdfTwoInputStreamOperator, Triggerable):
    """Runs a ``KeyedCoProcessFunction`` (or a ``CoProcessFunction``) on keyed connected
    streams (Flink's ``KeyedCoProcessOperator`` and ``LegacyKeyedCoProcessOperator``; operator
    name ``"Keyed Co-Process"``).

    Per record it sets the backend's current key from input 1's key selector
    (``context.key_selector``) or input 2's (``context.key_selector2``), so keyed state and
    timers are scoped to that key and ``ctx.get_current_key()`` returns it. Timers live in the
    internal timer service ``"user-timers"`` and fire (with their key current) when the combined
    watermark of both inputs passes them (event time) or the task's clock reaches them
    (processing time); ``on_timer(timestamp, ctx)`` gets ``ctx.time_domain()``.

    :param user_function: a ``KeyedCoProcessFunction`` or ``CoProcessFunction``.
    :raises RuntimeError: at ``open``, naming the operator, if it is not on keyed connected
        streams (no keyed backend, key selectors or timer service manager).
    :raises UnsupportedKeyError: (a ``TypeError``) for a key without a stable hash.
    """

    default_name = "Keyed Co-Process"
    TIMER_SERVICE_NAME = "user-timers"

    def open(self) -> None:
        kind = "KeyedCoProcessFunction" if isinstance(self.user_function, KeyedCoProcessFunction) else "CoProcessFunction"
        self._require_keyed(kind)
        context = self.context
        backend = context.keyed_state_backend
        self._set_key = backend.set_current_key
        self._key_of1 = _key_of(context.key_selector)
        self._key_of2 = _key_of(context.key_selector2)
        internal = context.timer_service_manager.get_internal_timer_service(self.TIMER_SERVICE_NAME, self)
        timer_service = SimpleTimerService(internal)
        self._ctx = _KeyedCoContext(timer_service, backend)
        self._on_timer_ctx = _KeyedCoOnTimerContext(timer_service)
        fn = self.user_function
        self._process1 = fn.process_element1
        self._process2 = fn.process_element2
        self._on_timer = getattr(fn, "on_timer", None)
        super().open()

    def process_batch1(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        run_process_batch(self.output, self._process1, self._ctx, values, timestamps, self._key_of1, self._set_key)

    def process_batch2(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        run_process_batch(self.output, self._process2, self._ctx, values, timestamps, self._key_of2, self._set_key)

    # -- Triggerable ------------------------------------------------------------------------
    def on_event_time(self, timer: InternalTimer) -> None:
        fire_timer(self.output, self._on_timer, self._on_timer_ctx, timer, TimeDomain.EVENT_TIME)

    def on_processing_time(self, timer: InternalTimer) -> None:
        fire_timer(self.output, self._on_timer, self._on_timer_ctx, timer, TimeDomain.PROCESSING_TIME)
