"""The StreamOperator contract and its base classes.

Follows Flink's ``StreamOperator``, ``OneInputStreamOperator``, ``AbstractStreamOperator``,
``AbstractUdfStreamOperator``, ``BoundedOneInput`` and ``Output``
(``org.apache.flink.streaming.api.operators``).

Rill difference, for speed: besides Flink's per-record ``process_element`` an operator has
``process_batch(values, timestamps)``, and an :class:`Output` has ``collect_batch``. Records
cross chain and task boundaries as batches: ``values`` is a ``list`` of record values and
``timestamps`` is either ``None`` (no record carries a timestamp) or a ``list`` of ``int``
epoch-ms timestamps of the same length. Every operator must implement at least one of the two
paths; the default of each calls the other, so the results are identical whichever path the
caller takes (the operator test harness checks both).

Life cycle (as Flink): ``setup`` → ``initialize_state`` → ``open`` → ``process_*``/
``process_watermark`` … → ``end_input`` (bounded input exhausted) → ``finish`` (flush
buffered output) → ``close`` (release resources; always called, also after failure).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, List, Optional

from rill.runtime.streamrecord import Watermark

if TYPE_CHECKING:  # pragma: no cover
    from rill.operators.context import StreamOperatorContext

__all__ = [
    "ChainingStrategy",
    "Output",
    "StreamOperator",
    "OneInputStreamOperator",
    "AbstractStreamOperator",
    "AbstractUdfStreamOperator",
]


class ChainingStrategy(enum.Enum):
    """Whether an operator may be chained to its predecessor / successors (Flink's
    ``ChainingStrategy``). ``ALWAYS``: chain wherever possible; ``HEAD``: never chained to a
    predecessor but successors may chain to it (sources, ``start_new_chain``); ``NEVER``: no
    chaining on either side (``disable_chaining``)."""

    ALWAYS = "ALWAYS"
    NEVER = "NEVER"
    HEAD = "HEAD"
    HEAD_WITH_SOURCES = "HEAD_WITH_SOURCES"


class Output:
    """Where an operator emits records and watermarks (Flink's ``Output``).

    Implementations: ``ChainingOutput`` (calls the next chained operator),
    ``RecordWriterOutput`` (serializes to the network), broadcasting variants for forks, and
    the test harness' collecting output. ``timestamps`` follows the batch convention of this
    module.
    """

    def collect(self, value: Any, timestamp: Optional[int] = None) -> None:
        self.collect_batch([value], None if timestamp is None else [timestamp])

    def collect_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        raise NotImplementedError

    def collect_side(self, output_tag: Any, value: Any, timestamp: Optional[int] = None) -> None:
        """Emit ``value`` to the side output named by ``output_tag`` (an ``OutputTag``)."""
        raise NotImplementedError

    def emit_watermark(self, watermark: Watermark) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class StreamOperator:
    """Base of all operators. Operators are created per subtask from the plan's operator
    factory (a pickled prototype), so instance attributes are per-subtask state."""

    #: default chaining strategy; the transformation can override it
    chaining_strategy: ChainingStrategy = ChainingStrategy.ALWAYS

    def setup(self, context: "StreamOperatorContext", output: Output) -> None:
        raise NotImplementedError

    def initialize_state(self) -> None:
        pass

    def open(self) -> None:
        pass

    def finish(self) -> None:
        pass

    def close(self) -> None:
        pass

    def process_watermark(self, watermark: Watermark) -> None:
        raise NotImplementedError

    def get_operator_name(self) -> str:
        return type(self).__name__


class OneInputStreamOperator(StreamOperator):
    """An operator with one input (Flink's ``OneInputStreamOperator`` plus ``BoundedOneInput``)."""

    def process_element(self, value: Any, timestamp: Optional[int] = None) -> None:
        self.process_batch([value], None if timestamp is None else [timestamp])

    def process_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        if timestamps is None:
            for v in values:
                self.process_element(v, None)
        else:
            for v, t in zip(values, timestamps):
                self.process_element(v, t)

    def end_input(self) -> None:
        """Called once when the input is exhausted (Flink's ``BoundedOneInput.endInput``)."""


class AbstractStreamOperator(OneInputStreamOperator):
    """Holds the context and output given at ``setup``; gives keyed operators their key
    context, keyed state backend and timer service; forwards watermarks by default.

    Attributes set by :meth:`setup`: ``context`` (a ``StreamOperatorContext``), ``output``.
    """

    context: "StreamOperatorContext"
    output: Output

    def setup(self, context: "StreamOperatorContext", output: Output) -> None:
        self.context = context
        self.output = output

    # -- keyed context ------------------------------------------------------------------
    @property
    def keyed_state_backend(self):
        """The subtask's keyed state backend, or ``None`` for non-keyed operators."""
        return self.context.keyed_state_backend

    def set_current_key(self, key: Any) -> None:
        self.context.keyed_state_backend.set_current_key(key)

    def get_current_key(self) -> Any:
        return self.context.keyed_state_backend.get_current_key()

    # -- time ---------------------------------------------------------------------------
    def process_watermark(self, watermark: Watermark) -> None:
        timers = self.context.timer_service_manager
        if timers is not None:
            timers.advance_watermark(watermark.timestamp)
        self.output.emit_watermark(watermark)


class AbstractUdfStreamOperator(AbstractStreamOperator):
    """An operator around one user function (Flink's ``AbstractUdfStreamOperator``): opens the
    function with the subtask's ``RuntimeContext`` and closes it with the operator.

    :param user_function: the ``Function`` object (a plain callable is wrapped by the API
        before it gets here).
    """

    def __init__(self, user_function: Any) -> None:
        self.user_function = user_function

    def open(self) -> None:
        open_fn = getattr(self.user_function, "open", None)
        if open_fn is not None:
            open_fn(self.context.runtime_context)

    def close(self) -> None:
        close_fn = getattr(self.user_function, "close", None)
        if close_fn is not None:
            close_fn()
