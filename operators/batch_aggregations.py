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

The loop runs only on tuples of one length ``L > position``, for every batch since the operator
opened on an empty state (so every stored value is such a tuple too). The first batch that is
not (another type, another length, a list, a Row) switches the operator to the general path
for good: the stored values may then be of any shape.
"""

from __future__ import annotations

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

#: ``TupleAggregation.shape`` once a batch broke the loop's preconditions.
GENERAL = -1


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
    :ivar shape: ``None`` until the first batch, then the tuples' length, or :data:`GENERAL`.
    """

    __slots__ = ("position", "reduce", "shape", "_loop")

    def __init__(self, aggregator: Any) -> None:
        self.position: int = aggregator.position
        self.reduce: Callable[[Any, Any], Any] = aggregator.reduce
        self.shape: Optional[int] = None
        self._loop = _loop_for(aggregator)

    def start(self, state_is_empty: bool) -> None:
        """Called at ``open``: a restored state may hold values of any shape."""
        self.shape = None if state_is_empty else GENERAL

    def accepts(self, values: List[Any]) -> bool:
        """Whether the loop may run on ``values`` (non-empty); ``False`` from the first batch that
        is not made of tuples of the established length on."""
        shape = self.shape
        if shape == GENERAL:
            return False
        if set(map(type, values)) == {tuple}:
            lengths = set(map(len, values))
            if len(lengths) == 1:
                (length,) = lengths
                if length > self.position and (shape is None or shape == length):
                    self.shape = length
                    return True
        self.shape = GENERAL
        return False

    def run(self, values: List[Any], keys: List[Any], by_namespaces: List[dict], append: Callable) -> None:
        """Combine each record with its key's stored value, store and ``append`` the result.

        :param by_namespaces: per record, its key group's ``namespace -> {key: value}`` map of the
            operator's state table (see :mod:`rill.state.state_table`).
        :raises TypeError: from the aggregator, for fields that cannot be added or compared.
        """
        self._loop(values, keys, by_namespaces, append, self.position, self.reduce, self.shape)


def _sum(values, keys, by_namespaces, append, p, reduce, length) -> None:
    ns = VOID_NAMESPACE
    if length == 2 and p == 1:  # (key, count): WordCount's shape
        for value, key, by_namespace in zip(values, keys, by_namespaces):
            by_key = by_namespace.get(ns)
            if by_key is None:
                by_namespace[ns] = {key: value}
            else:
                current = by_key.get(key)
                if current is not None:
                    try:
                        value = (current[0], current[1] + value[1])
                    except TypeError:
                        value = reduce(current, value)  # raises the aggregator's error
                by_key[key] = value
            append(value)
        return
    for value, key, by_namespace in zip(values, keys, by_namespaces):
        by_key = by_namespace.get(ns)
        if by_key is None:
            by_namespace[ns] = {key: value}
        else:
            current = by_key.get(key)
            if current is not None:
                try:
                    items = list(current)
                    items[p] = current[p] + value[p]
                    value = tuple(items)
                except TypeError:
                    value = reduce(current, value)
            by_key[key] = value
        append(value)


def _comparable(is_max: bool, by: bool, first: bool):
    """The loop of ``min``/``max`` (``by`` False) or ``min_by``/``max_by`` (``by`` True)."""

    def loop(values, keys, by_namespaces, append, p, reduce, length) -> None:
        ns = VOID_NAMESPACE
        for value, key, by_namespace in zip(values, keys, by_namespaces):
            by_key = by_namespace.get(ns)
            if by_key is None:
                by_namespace[ns] = {key: value}
                append(value)
                continue
            current = by_key.get(key)
            if current is not None:
                o1 = current[p]
                o2 = value[p]
                try:
                    extremal = o1 > o2 if is_max else o1 < o2
                    if extremal:
                        value = current
                    elif by:
                        if first and o1 == o2:
                            value = current  # else the new record
                    else:  # the stored record with only the field replaced (also on a tie)
                        items = list(current)
                        items[p] = o2
                        value = tuple(items)
                except TypeError:
                    value = reduce(current, value)  # raises the aggregator's error
            by_key[key] = value
            append(value)

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
