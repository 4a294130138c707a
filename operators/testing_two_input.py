"""Test harnesses for two-input operators (Flink's ``TwoInputStreamOperatorTestHarness`` and
``KeyedTwoInputStreamOperatorTestHarness``, ``org.apache.flink.streaming.util``). Public: user
code tests its co-operators, broadcast functions and joins with them.

They drive one operator instance as one subtask would, with the same real parts as the one-input
harnesses of :mod:`rill.operators.testing` (context, runtime context, heap keyed state backend
and timer services for the keyed harness, a ``TestProcessingTimeService`` advanced with
:meth:`set_processing_time`, a collecting output) and the same life cycle (``open``/``close``,
context manager). Input goes to ``process_element1``/``process_element2`` (or the batch
variants), watermarks to ``process_watermark1``/``process_watermark2``: the operator combines
them as the runtime does, so its watermark is the minimum of the two inputs' last watermarks.

Example::

    with KeyedTwoInputStreamOperatorTestHarness(
            KeyedCoProcessOperator(fn), lambda v: v[0], lambda v: v[0]) as h:
        h.process_element1(("a", 1), 10)
        h.process_element2(("a", 2), 12)
        h.process_watermark1(20)
        h.process_watermark2(15)      # combined watermark: 15
        assert h.extract_output_values() == [...]
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Union

from rill.operators.base import TwoInputStreamOperator
from rill.operators.testing import OneInputStreamOperatorTestHarness
from rill.common.streamrecord import StreamRecord, Watermark, WatermarkStatus

__all__ = ["TwoInputStreamOperatorTestHarness", "KeyedTwoInputStreamOperatorTestHarness"]


def _unpack(value: Any, timestamp: Optional[int]):
    if isinstance(value, StreamRecord):
        if timestamp is not None:
            raise ValueError("pass the timestamp in the StreamRecord or as an argument, not both")
        return value.value, value.timestamp
    return value, timestamp


def _checked_batch(values: List[Any], timestamps: Optional[List[int]]):
    values = list(values)
    if timestamps is not None:
        timestamps = list(timestamps)
        if len(timestamps) != len(values):
            raise ValueError(f"{len(values)} values but {len(timestamps)} timestamps")
    return values, timestamps


def _watermark(watermark: Union[Watermark, int]) -> Watermark:
    return watermark if isinstance(watermark, Watermark) else Watermark(watermark)


class TwoInputStreamOperatorTestHarness(OneInputStreamOperatorTestHarness):
    """Drives one two-input operator as subtask ``subtask_index`` of ``parallelism``.

    Parameters as :class:`~rill.operators.testing.OneInputStreamOperatorTestHarness`; the output
    accessors (``get_output``, ``extract_output_values``, ``get_side_output``...) and timer/state
    counters are the same. The one-input ``process_element``/``process_batch``/
    ``process_watermark``/``end_input()`` are refused: use the ``1``/``2`` variants.

    :raises TypeError: if ``operator`` is not a ``TwoInputStreamOperator``.
    """

    def __init__(self, operator: TwoInputStreamOperator, max_parallelism: int = 128, parallelism: int = 1,
                 subtask_index: int = 0, **kwargs: Any) -> None:
        if not isinstance(operator, TwoInputStreamOperator):
            raise TypeError(
                f"{type(self).__name__} drives TwoInputStreamOperators, got {type(operator).__name__}"
            )
        super().__init__(operator, max_parallelism, parallelism, subtask_index, **kwargs)

    # -- input 1 ------------------------------------------------------------------------
    def process_element1(self, value: Any, timestamp: Optional[int] = None) -> None:
        """Feed one record to input 1 (``operator.process_element1``); ``value`` may be a
        ``StreamRecord``."""
        self.operator.process_element1(*_unpack(value, timestamp))

    def process_batch1(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        """Feed one batch to input 1 (``operator.process_batch1``)."""
        self.operator.process_batch1(*_checked_batch(values, timestamps))

    def process_watermark1(self, watermark: Union[Watermark, int]) -> None:
        """A watermark (or its timestamp, ms) on input 1."""
        self.operator.process_watermark1(_watermark(watermark))

    def process_watermark_status1(self, status: WatermarkStatus) -> None:
        """Input 1 went IDLE or ACTIVE."""
        self.operator.process_watermark_status1(status)

    # -- input 2 ------------------------------------------------------------------------
    def process_element2(self, value: Any, timestamp: Optional[int] = None) -> None:
        """Feed one record to input 2 (``operator.process_element2``); ``value`` may be a
        ``StreamRecord``."""
        self.operator.process_element2(*_unpack(value, timestamp))

    def process_batch2(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        """Feed one batch to input 2 (``operator.process_batch2``)."""
        self.operator.process_batch2(*_checked_batch(values, timestamps))

    def process_watermark2(self, watermark: Union[Watermark, int]) -> None:
        """A watermark (or its timestamp, ms) on input 2."""
        self.operator.process_watermark2(_watermark(watermark))

    def process_watermark_status2(self, status: WatermarkStatus) -> None:
        """Input 2 went IDLE or ACTIVE."""
        self.operator.process_watermark_status2(status)

    def process_both_watermarks(self, watermark: Union[Watermark, int]) -> None:
        """The same watermark on both inputs (Flink's ``processBothWatermarks``)."""
        self.process_watermark1(watermark)
        self.process_watermark2(watermark)

    def end_input(self, input_id: int = 0) -> None:  # type: ignore[override]
        """``operator.end_input(input_id)``: input 1 or 2 is exhausted.

        :raises ValueError: unless ``input_id`` is 1 or 2.
        """
        if input_id not in (1, 2):
            raise ValueError(f"end_input of a two-input operator needs input_id 1 or 2, got {input_id!r}")
        self.operator.end_input(input_id)

    # -- the one-input methods do not apply ------------------------------------------------
    def _one_input_only(self, method: str) -> None:
        raise TypeError(f"{type(self).__name__}.{method}: a two-input operator takes {method}1 or {method}2")

    def process_element(self, value: Any, timestamp: Optional[int] = None) -> None:
        self._one_input_only("process_element")

    def process_elements(self, elements: List[Any]) -> None:
        self._one_input_only("process_element")

    def process_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        self._one_input_only("process_batch")

    def process_watermark(self, watermark: Union[Watermark, int]) -> None:
        self._one_input_only("process_watermark")


class KeyedTwoInputStreamOperatorTestHarness(TwoInputStreamOperatorTestHarness):
    """A harness for operators on keyed connected streams: the operator gets ``key_selector1``
    and ``key_selector2`` as its state key selectors, a ``HeapKeyedStateBackend`` over the
    key-group range of subtask ``subtask_index`` of ``parallelism`` and an
    ``InternalTimeServiceManager``. ``key_selector2`` may be ``None`` for an operator whose
    second input is not keyed (the broadcast side of ``CoBroadcastWithKeyedOperator``).

    :param key_selector1: a ``KeySelector`` or callable ``value -> key`` for input 1.
    :param key_selector2: the same for input 2, or ``None``.
    :param key_type: type information of the key (the type of a snapshot's ``key`` column).
    Other parameters as :class:`TwoInputStreamOperatorTestHarness`.
    :raises TypeError: if a key selector is neither a ``KeySelector`` nor callable.
    """

    def __init__(self, operator: TwoInputStreamOperator, key_selector1: Union[Callable[[Any], Any], Any],
                 key_selector2: Union[Callable[[Any], Any], Any, None], key_type: Any = None,
                 max_parallelism: int = 128, parallelism: int = 1, subtask_index: int = 0, **kwargs: Any) -> None:
        self.key_selector1 = self._selector(key_selector1, "key_selector1")
        self.key_selector2 = None if key_selector2 is None else self._selector(key_selector2, "key_selector2")
        self.key_type = key_type
        super().__init__(operator, max_parallelism, parallelism, subtask_index, **kwargs)

    @staticmethod
    def _selector(selector: Any, what: str) -> Callable[[Any], Any]:
        fn = getattr(selector, "get_key", selector)
        if not callable(fn):
            raise TypeError(f"{what} must be a KeySelector or a callable, got {selector!r}")
        return fn

    def _set_key_selectors(self) -> None:
        self.context.key_selector = self.key_selector1
        self.context.key_selector2 = self.key_selector2
        self.context.key_type = self.key_type

    def get_current_key(self) -> Any:
        return self.context.keyed_state_backend.get_current_key()

    def set_current_key(self, key: Any) -> None:
        """Set the backend's current key (to inspect a key's state from the test)."""
        self.context.keyed_state_backend.set_current_key(key)
