"""``StreamSink``: the operator around a ``SinkFunction`` (Flink's
``org.apache.flink.streaming.api.operators.StreamSink``; PyFlink's default sink names look like
``"Sink: Print to Std. Out"`` and are given by the API, not here)."""

from __future__ import annotations

from collections import deque
from itertools import repeat
from typing import Any, List, Optional

from rill.operators.base import AbstractUdfStreamOperator, Output
from rill.operators.simple import with_key_context
from rill.common.streamrecord import MIN_TIMESTAMP, Watermark

__all__ = ["StreamSink", "SinkContext"]


class SinkContext:
    """What ``SinkFunction.invoke(value, context)`` gets as ``context`` (Flink's
    ``SinkFunction.Context``). Valid only during the ``invoke`` call."""

    __slots__ = ("_operator", "_timestamp")

    def __init__(self, operator: "StreamSink") -> None:
        self._operator = operator
        self._timestamp: Optional[int] = None

    def current_processing_time(self) -> int:
        """The task's processing time, epoch ms."""
        return self._operator.context.processing_time_service.get_current_processing_time()

    def current_watermark(self) -> int:
        """The last watermark the sink received (``MIN_TIMESTAMP`` before the first), epoch ms."""
        return self._operator._current_watermark

    def timestamp(self) -> Optional[int]:
        """The record's timestamp (epoch ms), or ``None`` if it has none."""
        return self._timestamp


class StreamSink(AbstractUdfStreamOperator):
    """Calls ``SinkFunction.invoke(value, context)`` once per record, in order (Flink's
    ``StreamSink``).

    Optional hooks of the function, called when it defines them (Flink's ``SinkFunction``):
    ``write_watermark(watermark)`` on every watermark, ``finish()`` when the operator finishes
    (bounded input ended: flush what is buffered). ``open``/``close`` as every function.

    Errors raised by ``invoke`` propagate unchanged; the records before the failing one have
    been invoked.

    :param user_function: a ``SinkFunction``.
    """

    default_name = "Unnamed"  # DataStream.add_sink's default name

    def setup(self, context: Any, output: Output) -> None:
        super().setup(context, output)
        self._invoke = with_key_context(self.user_function.invoke, self.user_function, context)
        self._current_watermark = MIN_TIMESTAMP
        self._ctx = SinkContext(self)

    def process_element(self, value: Any, timestamp: Optional[int] = None) -> None:
        ctx = self._ctx
        ctx._timestamp = timestamp
        self._invoke(value, ctx)

    def process_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        invoke = self._invoke
        ctx = self._ctx
        if timestamps is None:
            ctx._timestamp = None
            # the calls driven from C (a deque that keeps nothing): no Python loop per record
            _consume(map(invoke, values, repeat(ctx)))
        else:
            for value, t in zip(values, timestamps):
                ctx._timestamp = t
                invoke(value, ctx)

    def process_watermark(self, watermark: Watermark) -> None:
        super().process_watermark(watermark)
        self._current_watermark = watermark.timestamp
        write_watermark = getattr(self.user_function, "write_watermark", None)
        if write_watermark is not None:
            write_watermark(watermark)

    def finish(self) -> None:
        finish_fn = getattr(self.user_function, "finish", None)
        if finish_fn is not None:
            finish_fn()


#: runs an iterator to its end, keeping nothing
_consume = deque(maxlen=0).extend
