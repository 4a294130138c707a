"""Outputs inside an OperatorChain (Flink's ``ChainingOutput``, ``BroadcastingOutputCollector``,
``RecordWriterOutput``; side outputs routed by ``OutputTag`` as Flink's ``OutputTag``-aware
outputs do).

Operator errors are attributed here: the first output that sees an exception coming out of its
operator tags it with the operator's name, so the task reports which operator failed while the
original exception (and traceback) is kept unchanged.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from rill.operators.base import Output, attribute_error
from rill.common.streamrecord import Watermark

__all__ = ["ChainingOutput", "BroadcastingOutput", "RecordWriterOutput", "TaggedOutput", "TypeConvertingOutput"]


class ChainingOutput(Output):
    """Hands records to the next operator of the chain, in the same thread, as a batch."""

    __slots__ = ("operator", "operator_name", "metrics")

    def __init__(self, operator, operator_name: str, metrics=None):
        self.operator = operator
        self.operator_name = operator_name
        self.metrics = metrics

    def collect(self, value: Any, timestamp: Optional[int] = None) -> None:
        try:
            self.operator.process_element(value, timestamp)
        except BaseException as e:
            attribute_error(e, self.operator_name)
            raise

    def collect_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        if not values:
            return
        try:
            self.operator.process_batch(values, timestamps)
        except BaseException as e:
            attribute_error(e, self.operator_name)
            raise

    def emit_watermark(self, watermark: Watermark) -> None:
        try:
            self.operator.process_watermark(watermark)
        except BaseException as e:
            attribute_error(e, self.operator_name)
            raise

    def emit_watermark_status(self, status) -> None:
        try:
            self.operator.process_watermark_status(status)
        except BaseException as e:
            attribute_error(e, self.operator_name)
            raise

    def collect_side(self, output_tag, value, timestamp=None) -> None:  # pragma: no cover
        raise AssertionError("side outputs are routed by TaggedOutput")


class RecordWriterOutput(Output):
    """Serializes into the network: a ``RecordWriter`` for one non-chained out edge.

    :param target_name: the downstream operator's name, for error messages about key
        selection (the key_by's key selector runs here, in the producing task).
    """

    def __init__(self, record_writer, target_name: str):
        self.record_writer = record_writer
        self.target_name = target_name

    def collect_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        if not values:
            return
        try:
            self.record_writer.emit_batch(values, timestamps)
        except BaseException as e:
            # the only user code a writer runs is the partitioner's: key_by's key selector, or
            # partition_custom's partitioner and key selector
            strategy = str(self.record_writer.partitioner)
            if strategy in ("HASH", "CUSTOM"):
                what = "key selector" if strategy == "HASH" else "partitioner"
                attribute_error(e, f"{self.target_name} ({what})")
            raise

    def emit_watermark(self, watermark: Watermark) -> None:
        self.record_writer.emit_watermark(watermark)

    def emit_watermark_status(self, status) -> None:
        # in-band and in order with the records, like a watermark
        self.record_writer.broadcast_event(status)

    def collect_side(self, output_tag, value, timestamp=None) -> None:  # pragma: no cover
        raise AssertionError("side outputs are routed by TaggedOutput")

    def close(self) -> None:
        self.record_writer.close()


class TypeConvertingOutput(Output):
    """Applies an operator's declared ``output_type`` to its records before ``inner`` (Flink
    serializes them with that type's serializer there: ``Types.FLOAT()`` values come back as
    float32, ``Types.INT()`` values must fit 32 bits; see :mod:`rill.common.type_conversion`).

    Used only where Flink would serialize (the network, a source's output, a sink's input) and
    only for a type whose converter is not ``None``: untyped streams never pay for it.

    :raises TypeValueError: from ``collect_batch`` for a record that does not fit the type; the
        message names the operator, the value and the type's rule.
    """

    def __init__(self, inner: Output, convert_batch):
        self.inner = inner
        #: ``values -> values`` (:func:`~rill.common.type_conversion.batch_converter`)
        self.convert_batch = convert_batch

    def collect_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        if values:
            self.inner.collect_batch(self.convert_batch(values), timestamps)

    def emit_watermark(self, watermark: Watermark) -> None:
        self.inner.emit_watermark(watermark)

    def emit_watermark_status(self, status) -> None:
        self.inner.emit_watermark_status(status)

    def collect_side(self, output_tag, value, timestamp=None) -> None:  # pragma: no cover
        raise AssertionError("side outputs are routed by TaggedOutput")

    def close(self) -> None:
        self.inner.close()


class BroadcastingOutput(Output):
    """Copies every record to several outputs (an operator with several successors).
    Records are shared, not copied: Flink's object-reuse-disabled copying is not needed
    because Rill operators must not mutate their input records."""

    def __init__(self, outputs: List[Output]):
        self.outputs = outputs

    def collect_batch(self, values, timestamps=None) -> None:
        for o in self.outputs:
            o.collect_batch(values, timestamps)

    def emit_watermark(self, watermark) -> None:
        for o in self.outputs:
            o.emit_watermark(watermark)

    def emit_watermark_status(self, status) -> None:
        for o in self.outputs:
            o.emit_watermark_status(status)


class TaggedOutput(Output):
    """An operator's output: main records to ``main``, side outputs by tag id.

    Side-output records for a tag with no consumer are dropped, as in Flink.
    """

    def __init__(self, main: Output, side: Dict[str, Output]):
        self.main = main
        self.side = side
        # the main path costs no extra call per batch: bound straight to the main output
        self.collect_batch = main.collect_batch  # type: ignore[method-assign]
        self.collect = main.collect  # type: ignore[method-assign]

    def collect_side(self, output_tag, value, timestamp=None) -> None:
        out = self.side.get(output_tag.tag_id)
        if out is not None:
            out.collect_batch([value], None if timestamp is None else [timestamp])

    def emit_watermark(self, watermark) -> None:
        self.main.emit_watermark(watermark)
        for o in self.side.values():
            o.emit_watermark(watermark)

    def emit_watermark_status(self, status) -> None:
        self.main.emit_watermark_status(status)
        for o in self.side.values():
            o.emit_watermark_status(status)


class _NoOutput(Output):
    def collect_batch(self, values, timestamps=None) -> None:
        pass

    def emit_watermark(self, watermark) -> None:
        pass

    def emit_watermark_status(self, status) -> None:
        pass

    def collect_side(self, output_tag, value, timestamp=None) -> None:
        pass


NO_OUTPUT = _NoOutput()
