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
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from rill.operators.checkpointed_function import (
    notify_function_checkpoint_aborted,
    notify_function_checkpoint_complete,
    restore_function_state,
    snapshot_function_state,
)
from rill.common.streamrecord import MIN_TIMESTAMP, Watermark, WatermarkStatus
from rill.state.operator_state import DefaultOperatorStateBackend

if TYPE_CHECKING:  # pragma: no cover
    from rill.operators.context import StreamOperatorContext

__all__ = [
    "ChainingStrategy",
    "Output",
    "StreamOperator",
    "OneInputStreamOperator",
    "TwoInputStreamOperator",
    "AbstractStreamOperator",
    "AbstractUdfStreamOperator",
    "AbstractTwoInputStreamOperator",
    "attribute_error",
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


def attribute_error(error: BaseException, operator_name: str) -> None:
    """Record on ``error`` the name of the innermost operator it came out of (once).

    The first output or task loop that sees an exception coming out of an operator tags it, so
    the task reports which operator failed while the exception and its traceback stay as they
    were.
    """
    if getattr(error, "_rill_operator", None) is None:
        try:
            error._rill_operator = operator_name  # type: ignore[attr-defined]
        except AttributeError:  # exceptions with __slots__
            pass


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

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        """Tell downstream that this stream went IDLE or ACTIVE (Flink's
        ``emitWatermarkStatus``)."""
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

    def process_watermark_status(self, status: WatermarkStatus) -> None:
        """The combined input went IDLE or ACTIVE; by default the status is forwarded."""
        self.output.emit_watermark_status(status)

    def get_operator_name(self) -> str:
        return type(self).__name__

    def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        """Called on the task thread before the task sends the barrier of ``checkpoint_id``
        downstream: the last moment to emit records that belong before it (Flink's
        ``prepareSnapshotPreBarrier``); nothing by default."""

    def snapshot_state(self, checkpoint_id: int, timestamp: int) -> Dict[str, Tuple[str, List[Any]]]:
        """The operator state to checkpoint as ``{name: (mode, entries)}`` (Flink's
        ``StreamOperator.snapshotState``); none by default."""
        return {}

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` completed on every task (Flink's
        ``CheckpointListener.notifyCheckpointComplete``, which every ``StreamOperator`` is);
        called on the task thread. It subsumes earlier checkpoints whose notification was
        skipped. Nothing by default."""

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` was aborted (Flink's
        ``CheckpointListener.notifyCheckpointAborted``); nothing by default."""


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

    #: set by :meth:`setup`
    context: Optional["StreamOperatorContext"] = None
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

    # -- operator state (Flink's AbstractStreamOperator / StreamOperatorStateHandler) ---
    _operator_state_backend: Any = None
    _restored_operator_state: Optional[Dict[str, Any]] = None
    _restored_checkpoint_id: Optional[int] = None

    def restore_state(self, operator_state: Optional[Mapping[str, Any]], checkpoint_id: Optional[int] = None) -> None:
        """Restore from a checkpoint: call after ``setup``, before ``initialize_state``.
        ``operator_state`` is this subtask's share (``rill.state.redistribute``; ``None`` or
        empty if it got none); the operator then reports :meth:`is_restored`.

        :raises RuntimeError: if the operator state backend is in use already.
        """
        if self._operator_state_backend is not None:
            raise RuntimeError(f"{self.get_operator_name()}: restore_state() after the operator state was initialized")
        self._restored_operator_state = dict(operator_state or {})
        self._restored_checkpoint_id = checkpoint_id

    def is_restored(self) -> bool:
        """Whether the operator restores from a snapshot (Flink's ``isRestored``): its state
        services were restored by the ``StreamTaskStateInitializer``, or :meth:`restore_state`
        was called."""
        if self._restored_operator_state is not None:
            return True
        return self.context is not None and self.context.restored

    @property
    def restored_checkpoint_id(self) -> Optional[int]:
        """The id of the checkpoint restored from (by :meth:`restore_state` or the state
        initializer), or ``None``."""
        if self._restored_operator_state is not None:
            return self._restored_checkpoint_id
        return None if self.context is None else self.context.restored_checkpoint_id

    @property
    def operator_state_backend(self) -> Any:
        """The subtask's ``DefaultOperatorStateBackend``: the context's
        ``operator_state_backend`` if the task provides one, else created here; made on first
        use, with the restored state loaded."""
        backend = self._operator_state_backend
        if backend is None:
            backend = getattr(self.context, "operator_state_backend", None)
            if backend is None:
                backend = DefaultOperatorStateBackend(self.context.operator_name)
            if self._restored_operator_state:
                backend.restore(self._restored_operator_state)
            self._operator_state_backend = backend
        return backend

    def snapshot_state(self, checkpoint_id: int, timestamp: int) -> Dict[str, Tuple[str, List[Any]]]:
        """Snapshot the operator state for checkpoint ``checkpoint_id`` (``timestamp``: epoch
        ms), as ``{name: (mode, entries)}`` (see ``rill.state.operator_state``); UDF operators
        first call the function's ``snapshot_state``."""
        if self._operator_state_backend is None and self._restored_operator_state is None:
            return {}
        return self.operator_state_backend.snapshot()

    # -- time ---------------------------------------------------------------------------
    def process_watermark(self, watermark: Watermark) -> None:
        timers = self.context.timer_service_manager
        if timers is not None:
            timers.advance_watermark(watermark.timestamp)
        self.output.emit_watermark(watermark)


class TwoInputStreamOperator(StreamOperator):
    """An operator with two inputs (Flink's ``TwoInputStreamOperator``): records of input 1
    and input 2 arrive through ``process_batch1``/``process_batch2`` (or the per-record
    ``process_element1``/``process_element2``), watermarks per input through
    ``process_watermark1``/``process_watermark2``; ``end_input(input_id)`` per input."""

    def process_element1(self, value: Any, timestamp: Optional[int] = None) -> None:
        self.process_batch1([value], None if timestamp is None else [timestamp])

    def process_element2(self, value: Any, timestamp: Optional[int] = None) -> None:
        self.process_batch2([value], None if timestamp is None else [timestamp])

    def process_batch1(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        for i, v in enumerate(values):
            self.process_element1(v, None if timestamps is None else timestamps[i])

    def process_batch2(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        for i, v in enumerate(values):
            self.process_element2(v, None if timestamps is None else timestamps[i])

    def process_watermark1(self, watermark: Watermark) -> None:
        raise NotImplementedError

    def process_watermark2(self, watermark: Watermark) -> None:
        raise NotImplementedError

    def end_input(self, input_id: int) -> None:
        """Input ``input_id`` (1 or 2) is exhausted (Flink's ``BoundedMultiInput``)."""


class AbstractTwoInputStreamOperator(AbstractStreamOperator, TwoInputStreamOperator):
    """Combines the two inputs' watermarks as Flink's ``AbstractStreamOperator`` does: the
    operator's watermark is the minimum of the last watermark of each input; an IDLE input is
    left out of the minimum."""

    _input1_watermark: int = MIN_TIMESTAMP
    _input2_watermark: int = MIN_TIMESTAMP
    _combined_watermark: int = MIN_TIMESTAMP
    _input1_idle: bool = False
    _input2_idle: bool = False

    def _advance_combined(self) -> None:
        marks = [w for w, idle in ((self._input1_watermark, self._input1_idle),
                                   (self._input2_watermark, self._input2_idle)) if not idle]
        if not marks:
            return
        combined = min(marks)
        if combined > self._combined_watermark:
            self._combined_watermark = combined
            self.process_watermark(Watermark(combined))

    def process_watermark1(self, watermark: Watermark) -> None:
        self._input1_watermark = max(self._input1_watermark, watermark.timestamp)
        self._advance_combined()

    def process_watermark2(self, watermark: Watermark) -> None:
        self._input2_watermark = max(self._input2_watermark, watermark.timestamp)
        self._advance_combined()

    def process_watermark_status1(self, status: WatermarkStatus) -> None:
        self._input1_idle = status.is_idle
        self._status_changed()

    def process_watermark_status2(self, status: WatermarkStatus) -> None:
        self._input2_idle = status.is_idle
        self._status_changed()

    def _status_changed(self) -> None:
        both_idle = self._input1_idle and self._input2_idle
        self.output.emit_watermark_status(WatermarkStatus.IDLE if both_idle else WatermarkStatus.ACTIVE)
        if not both_idle:
            self._advance_combined()

    def end_input(self, input_id: int = 1) -> None:
        pass


class AbstractUdfStreamOperator(AbstractStreamOperator):
    """An operator around one user function (Flink's ``AbstractUdfStreamOperator``): opens the
    function with the subtask's ``RuntimeContext`` and closes it with the operator.

    :param user_function: the ``Function`` object (a plain callable is wrapped by the API
        before it gets here).
    """

    def __init__(self, user_function: Any) -> None:
        self.user_function = user_function

    def initialize_state(self) -> None:
        """A ``CheckpointedFunction`` gets ``initialize_state(FunctionInitializationContext)``."""
        restore_function_state(self, self.user_function)

    def snapshot_state(self, checkpoint_id: int, timestamp: int) -> Dict[str, Tuple[str, List[Any]]]:
        """The function's ``snapshot_state`` (if a ``CheckpointedFunction``), then the operator
        state snapshot of :meth:`AbstractStreamOperator.snapshot_state`."""
        snapshot_function_state(self.user_function, checkpoint_id, timestamp)
        return super().snapshot_state(checkpoint_id, timestamp)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Forwarded to the function if it is a ``CheckpointListener`` (Flink's
        ``AbstractUdfStreamOperator.notifyCheckpointComplete``)."""
        super().notify_checkpoint_complete(checkpoint_id)
        notify_function_checkpoint_complete(self.user_function, checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Forwarded to the function if it is a ``CheckpointListener``."""
        super().notify_checkpoint_aborted(checkpoint_id)
        notify_function_checkpoint_aborted(self.user_function, checkpoint_id)

    def open(self) -> None:
        open_fn = getattr(self.user_function, "open", None)
        if open_fn is not None:
            open_fn(self.context.runtime_context)

    def close(self) -> None:
        close_fn = getattr(self.user_function, "close", None)
        if close_fn is not None:
            close_fn()
