"""The built-in aggregations (``KeyedStream.sum/min/max/min_by/max_by`` on an ``int``
position) run per batch, without a Python call per record (issue 16).

:class:`~rill.operators.keyed_reduce.StreamGroupedReduce` hands a whole batch of tuples to a
:class:`TupleAggregation`, whose loop combines each record with its key's stored value inline
(an index, an ``+`` or a comparison, a tuple display) instead of calling the aggregator's
``reduce``. Results, types and emission are those of
:class:`~rill.operators.aggregations.SumAggregator` and
:class:`~rill.operators.aggregations.ComparableAggregator` (Flink's ``SumAggregator`` and
``ComparableAggregator``): one emitted value per record, the other fields the first record's
(``sum``, ``min``, ``max``), the whole record with the extremal field for ``min_by``/``max_by``
(ties keep the stored record when ``first``). Anything the loop does not cover goes through the
aggregator's own ``reduce``, which also raises its errors (e.g. fields that cannot be added), so
both paths raise alike.

The loop runs on batches made only of tuples, while every batch since the operator opened on an
empty state was (so every stored value is a tuple too); ``sum`` on position 0 or 1 of pairs
also needs every stored value to be a pair (checked when a key's first record is stored). The
first batch that breaks this switches the operator to the general path for good: the stored
values may then be of any shape.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any, Callable, List, Optional

from rill.operators.aggregations import (
    AggregationType,
    ComparableAggregator,
    MaxAggregator,
    MaxByAggregator,
    MinAggregator,
    MinByAggregator,
    SumAggregator,
)
from rill.state.api import VOID_NAMESPACE

__all__ = ["TupleAggregation", "tuple_aggregation_for"]

def tuple_aggregation_for(function: Any) -> Optional["TupleAggregation"]:
    """A :class:`TupleAggregation` for a ``SumAggregator`` or ``ComparableAggregator`` (exactly
    those classes, not subclasses that could override ``reduce``) on an ``int`` position, else
    ``None`` (the reduce function then runs per record)."""
    kind = type(function)
    if kind is not SumAggregator and kind not in _COMPARABLE_CLASSES:
        return None
    if type(function.position) is not int:
        return None
    return TupleAggregation(function)


class TupleAggregation:
    """One operator's per-batch loop for a built-in aggregation on tuples.

    :param aggregator: a ``SumAggregator`` or ``ComparableAggregator`` with an ``int``
        ``position``; its ``reduce`` handles what the loop does not (and raises its errors).
    :ivar enabled: whether batches may still take the loop (see the module docstring).
    """

    __slots__ = ("position", "reduce", "enabled", "_loop")

    def __init__(self, aggregator: Any) -> None:
        self.position: int = aggregator.position
        self.reduce: Callable[[Any, Any], Any] = aggregator.reduce
        self.enabled = True
        self._loop = _loop_for(aggregator)

    def start(self, state_is_empty: bool) -> None:
        """Called at ``open``: a restored state may hold values of any shape."""
        self.enabled = state_is_empty

    def accepts(self, values: List[Any]) -> bool:
        """Whether the loop may run on ``values`` (non-empty); ``False`` from the first batch that
        is not made only of tuples on."""
        # counting in a list of types costs half of building a set of them
        if self.enabled and list(map(type, values)).count(tuple) == len(values):
            return True
        self.enabled = False
        return False

    def run(self, values: List[Any], keys: List[Any], by_namespaces: List[dict], append: Callable) -> bool:
        """Combine each record with its key's stored value, store and ``append`` the result.

        :param by_namespaces: per record, its key group's ``namespace -> {key: value}`` map of the
            operator's state table (see :mod:`rill.state.state_table`).
        :returns: ``True``; ``False`` if a record broke the loop's preconditions: the records
            before it were processed (appended), the caller processes the rest on the general
            path, and the loop is disabled from now on.
        :raises TypeError, InvalidFieldReferenceError: from the aggregator, for fields that
            cannot be added or compared, or do not exist.
        """
        ns = VOID_NAMESPACE
        # each record's {key: value} dict, at C speed; a key group without one gets an empty dict
        # now (filled by the record), removed again if the batch fails before filling it
        by_keys = list(map(dict.get, by_namespaces, repeat(ns)))
        created: List[dict] = []
        if None in by_keys:
            for i, by_key in enumerate(by_keys):
                if by_key is None:
                    by_namespace = by_namespaces[i]
                    by_key = by_namespace.get(ns)
                    if by_key is None:
                        by_key = by_namespace[ns] = {}
                        created.append(by_namespace)
                    by_keys[i] = by_key
        try:
            completed = self._loop(values, keys, by_keys, append, self.position, self.reduce)
        finally:
            for by_namespace in created:
                if not by_namespace[ns]:  # the layout keeps no empty containers
                    del by_namespace[ns]
        if not completed:
            self.enabled = False
        return completed


_FALLBACK = (TypeError, IndexError)


def _sum(values, keys, by_keys, append, p, reduce) -> bool:
    if p == 1 or p == 0:
        return _sum_pairs(values, keys, by_keys, append, p, reduce)
    for value, key, by_key in zip(values, keys, by_keys):
        current = by_key.get(key)
        if current is not None:
            try:
                items = list(current)
                items[p] = current[p] + value[p]
                value = tuple(items)
            except _FALLBACK:
                value = reduce(current, value)  # raises the aggregator's error
        by_key[key] = value
        append(value)
    return True


def _sum_pairs(values, keys, by_keys, append, p, reduce) -> bool:
    """``sum(1)`` (WordCount's ``(word, count)``) or ``sum(0)`` over pairs."""
    for value, key, by_key in zip(values, keys, by_keys):
        current = by_key.get(key)
        if current is None:
            if len(value) != 2:
                return False  # stored, it would break the pair formula below for its key
        else:
            try:
                if p:
                    value = (current[0], current[1] + value[1])
                else:
                    value = (current[0] + value[0], current[1])
            except _FALLBACK:
                value = reduce(current, value)
        by_key[key] = value
        append(value)
    return True


def _comparable(is_max: bool, by: bool, first: bool):
    """The loop of ``min``/``max`` (``by`` False) or ``min_by``/``max_by`` (``by`` True)."""

    def loop(values, keys, by_keys, append, p, reduce) -> bool:
        for value, key, by_key in zip(values, keys, by_keys):
            current = by_key.get(key)
            if current is not None:
                try:
                    o1 = current[p]
                    o2 = value[p]
                    if o1 > o2 if is_max else o1 < o2:
                        value = current
                    elif by:
                        if first and o1 == o2:
                            value = current  # else the new record
                    else:  # the stored record with only the field replaced (also on a tie)
                        items = list(current)
                        items[p] = o2
                        value = tuple(items)
                except _FALLBACK:
                    value = reduce(current, value)  # raises the aggregator's error
            by_key[key] = value
            append(value)
        return True

    return loop


_COMPARABLE_CLASSES = frozenset(
    (ComparableAggregator, MinAggregator, MaxAggregator, MinByAggregator, MaxByAggregator)
)


def _loop_for(aggregator: Any):
    if type(aggregator) is SumAggregator:
        return _sum
    kind = aggregator.aggregation_type
    return _comparable(
        kind in (AggregationType.MAX, AggregationType.MAX_BY),
        kind in (AggregationType.MIN_BY, AggregationType.MAX_BY),
        aggregator.first,
    )
