"""Stateless one-record-at-a-time operators: ``StreamMap``, ``StreamFlatMap``, ``StreamFilter``
(Flink's classes of the same names in ``org.apache.flink.streaming.api.operators``).

Each implements both paths of :mod:`rill.operators.base`: ``process_element`` for one record
and ``process_batch`` for a batch, with identical results. An output record keeps its input
record's timestamp (Flink's ``element.replace`` / ``TimestampedCollector``); a batch without
timestamps gives a batch without timestamps. Empty output batches are not emitted.

Errors raised by the user function propagate unchanged (the task adds the operator's and
subtask's names). What the records before the failing one produced is emitted first, as
record-at-a-time processing would have done; nothing after it is processed.

Batches handed to an output are never modified afterwards, and the ``timestamps`` list of the
input may be passed on as it is (operators must treat input lists as read-only).
"""

from __future__ import annotations

from itertools import chain, compress
from typing import Any, List, Optional

from rill.operators.base import AbstractUdfStreamOperator, Output

__all__ = ["StreamMap", "StreamFlatMap", "StreamFilter"]

_from_iterable = chain.from_iterable


class StreamMap(AbstractUdfStreamOperator):
    """Applies a ``MapFunction`` to every record (Flink's ``StreamMap``; PyFlink's operator
    name ``"Map"``). Output records keep the input timestamps.

    :param user_function: a ``MapFunction`` (``map(value) -> value``).
    """

    default_name = "Map"

    def setup(self, context: Any, output: Output) -> None:
        super().setup(context, output)
        self._map = self.user_function.map

    def process_element(self, value: Any, timestamp: Optional[int] = None) -> None:
        self.output.collect(self._map(value), timestamp)

    def process_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        out: List[Any] = []
        try:
            out.extend(map(self._map, values))  # keeps the prefix if map() raises
        except BaseException:
            if out:
                self.output.collect_batch(out, None if timestamps is None else timestamps[: len(out)])
            raise
        if out:
            self.output.collect_batch(out, timestamps)


class StreamFlatMap(AbstractUdfStreamOperator):
    """Applies a ``FlatMapFunction`` to every record and emits every value of the iterable it
    returns or yields (Flink's ``StreamFlatMap``; PyFlink's operator name ``"FlatMap"``). Each
    output record carries its input record's timestamp.

    :param user_function: a ``FlatMapFunction`` (``flat_map(value) -> Iterable``).
    :raises TypeError: (from Python) when ``flat_map`` returns something that is not iterable,
        e.g. ``None``.
    """

    default_name = "FlatMap"

    def setup(self, context: Any, output: Output) -> None:
        super().setup(context, output)
        self._flat_map = self.user_function.flat_map

    def process_element(self, value: Any, timestamp: Optional[int] = None) -> None:
        out: List[Any] = []
        try:
            out.extend(self._flat_map(value))
        finally:
            if out:
                self.output.collect_batch(out, None if timestamp is None else [timestamp] * len(out))

    def process_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        flat_map = self._flat_map
        out: List[Any] = []
        if timestamps is None:
            try:
                out.extend(_from_iterable(map(flat_map, values)))
            finally:
                if out:
                    self.output.collect_batch(out, None)
            return
        out_ts: List[int] = []
        extend = out.extend
        t = None
        try:
            for value, t in zip(values, timestamps):
                extend(flat_map(value))
                n = len(out) - len(out_ts)
                if n:
                    out_ts += [t] * n
        finally:
            if out:
                n = len(out) - len(out_ts)  # outputs of a generator that raised midway
                if n:
                    out_ts += [t] * n
                self.output.collect_batch(out, out_ts)


class StreamFilter(AbstractUdfStreamOperator):
    """Keeps the records for which a ``FilterFunction`` returns a true value (Flink's
    ``StreamFilter``; PyFlink's operator name ``"Filter"``).

    :param user_function: a ``FilterFunction`` (``filter(value) -> bool``; any value is taken
        for its truth, as Python's ``filter``).
    """

    default_name = "Filter"

    def setup(self, context: Any, output: Output) -> None:
        super().setup(context, output)
        self._filter = self.user_function.filter

    def process_element(self, value: Any, timestamp: Optional[int] = None) -> None:
        if self._filter(value):
            self.output.collect(value, timestamp)

    def process_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        if timestamps is None:
            out: List[Any] = []
            try:
                out.extend(filter(self._filter, values))
            finally:
                if out:
                    self.output.collect_batch(out, None)
            return
        keep: List[Any] = []
        try:
            keep.extend(map(self._filter, values))
        finally:
            # on an error, compress() stops at the end of ``keep``: the prefix is emitted
            out = list(compress(values, keep))
            if out:
                self.output.collect_batch(out, list(compress(timestamps, keep)))
