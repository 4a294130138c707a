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

On a keyed stream (``context.key_selector`` set), Flink sets the record's key as the current key
before every operator call, so a rich function may use keyed state. Rill does the same through
:func:`with_key_context`, but only for *rich* functions (those that override ``open``: only they
can reach keyed state), so plain callables on keyed streams pay nothing.
"""

from __future__ import annotations

from itertools import chain, compress
from typing import Any, Callable, List, Optional

from rill.common.functions import is_rich
from rill.operators.base import AbstractUdfStreamOperator, Output

__all__ = ["StreamMap", "StreamFlatMap", "StreamFilter", "with_key_context"]

_from_iterable = chain.from_iterable


_CONTEXT_SELECTOR = object()


def with_key_context(fn: Callable[..., Any], user_function: Any, context: Any,
                     selector: Any = _CONTEXT_SELECTOR) -> Callable[..., Any]:
    """``fn`` (a method of ``user_function``), or a wrapper that first sets the backend's
    current key from ``selector(value)`` (default ``context.key_selector``; two-input operators
    pass ``context.key_selector2`` for their second input) when the operator is on a keyed
    stream and ``user_function`` is rich (overrides ``Function.open``)."""
    if selector is _CONTEXT_SELECTOR:
        selector = context.key_selector
    backend = context.keyed_state_backend
    if selector is None or backend is None or not is_rich(user_function):
        return fn
    key_of = getattr(selector, "get_key", selector)
    set_key = backend.set_current_key

    def keyed(value: Any, *args: Any) -> Any:
        set_key(key_of(value))
        return fn(value, *args)

    return keyed


class StreamMap(AbstractUdfStreamOperator):
    """Applies a ``MapFunction`` to every record (Flink's ``StreamMap``; PyFlink's operator
    name ``"Map"``). Output records keep the input timestamps.

    :param user_function: a ``MapFunction`` (``map(value) -> value``).
    """

    default_name = "Map"

    def setup(self, context: Any, output: Output) -> None:
        super().setup(context, output)
        self._map = with_key_context(self.user_function.map, self.user_function, context)

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
        self._flat_map = with_key_context(self.user_function.flat_map, self.user_function, context)

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
                result = flat_map(value)
                cls = result.__class__
                if cls is list or cls is tuple:
                    extend(result)
                    out_ts += [t] * len(result)
                else:  # a generator or other iterable: count what it added
                    extend(result)
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
        self._filter = with_key_context(self.user_function.filter, self.user_function, context)

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
