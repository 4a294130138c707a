"""The reduce functions behind ``KeyedStream.sum/min/max/min_by/max_by``
(Flink's ``SumAggregator`` and ``ComparableAggregator`` with ``AggregationType``,
``org.apache.flink.streaming.api.functions.aggregation``). They run inside a
:class:`~rill.operators.keyed_reduce.StreamGroupedReduce`, so ``value1`` is always the key's
stored (aggregated so far) value and ``value2`` the new record.

Fields (Flink's ``FieldAccessor``):

- ``tuple`` (also named tuples) and ``list``: an ``int`` position (0-based); named tuples also
  take a field name;
- ``Row`` and Row-like objects (indexable by position, with field names in ``_fields`` or from
  ``as_dict()``): an ``int`` position or a field name;
- anything else is a basic type (a scalar): only position ``0``, which selects the whole value.

Results (Flink's semantics):

- ``sum``: ``value1`` with the field replaced by ``value1[f] + value2[f]``; the other fields are
  the first record's. A scalar sums directly. Any type with ``+`` is accepted (Flink accepts
  only numbers).
- ``min``/``max``: ``value1`` with only the field replaced by the smaller/larger of the two
  (other fields stay the first record's; on a tie the field takes ``value2``'s value, as
  Flink's ``ComparableAggregator``).
- ``min_by``/``max_by``: the whole record with the smaller/larger field; on a tie the first
  one (``first=True``, PyFlink's and Flink's default) or the last one (``first=False``).

The result has the input's container type (a tuple stays a tuple, a Row a Row, a named tuple
the same named tuple) and is a new object whenever a field changes: values already emitted or
stored are never mutated. Row-like objects are copied with ``copy.copy`` and updated with
``__setitem__``.

Errors: :class:`InvalidFieldReferenceError` (a ``ValueError`` and a ``LookupError``) names the
position and the value when the position is out of range, the field name is missing, or a basic
type is asked for a field other than 0; ``TypeError`` (with the field and both values) when the
fields cannot be added or compared.
"""

from __future__ import annotations

import copy
import enum
from typing import Any, Optional, Sequence, Union

from rill.common.functions import ReduceFunction

__all__ = [
    "AggregationType",
    "InvalidFieldReferenceError",
    "SumAggregator",
    "ComparableAggregator",
    "MinAggregator",
    "MaxAggregator",
    "MinByAggregator",
    "MaxByAggregator",
    "create_aggregator",
    "field_index",
    "with_field",
]

Position = Union[int, str]


class AggregationType(enum.Enum):
    """Flink's ``AggregationFunction.AggregationType`` (``MINBY``/``MAXBY`` spelled
    ``MIN_BY``/``MAX_BY``)."""

    SUM = "sum"
    MIN = "min"
    MAX = "max"
    MIN_BY = "min_by"
    MAX_BY = "max_by"


class InvalidFieldReferenceError(ValueError, LookupError):
    """A position or field name does not select a field of a value (Flink's
    ``InvalidFieldReferenceException``)."""


# -- field access ---------------------------------------------------------------------------

def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 200:
        text = text[:197] + "..."
    return f"{text} of type {type(value).__name__}"


def _is_row_like(value: Any) -> bool:
    t = type(value)
    return bool(getattr(t, "_rill_row", False)) or (
        hasattr(t, "__getitem__") and (hasattr(t, "as_dict") or hasattr(t, "_fields"))
    )


def _field_names(value: Any) -> Optional[Sequence[str]]:
    names = getattr(value, "_fields", None)
    if names is not None:
        return names
    as_dict = getattr(value, "as_dict", None)
    if as_dict is None:
        return None
    try:
        return list(as_dict())
    except (TypeError, ValueError):  # a Row without field names
        return None


def field_index(value: Any, position: Position) -> Optional[int]:
    """The index of the field of ``value`` that ``position`` selects, or ``None`` for a basic
    type (position 0 = the whole value).

    :raises InvalidFieldReferenceError: see the module docstring.
    """
    t = type(value)
    if t is tuple or t is list or isinstance(value, (tuple, list)) or _is_row_like(value):
        if type(position) is int:
            if position < len(value):
                return position
            raise InvalidFieldReferenceError(
                f"Position {position} is out of range for {_describe(value)}, which has "
                f"{len(value)} field(s) (positions 0..{len(value) - 1})"
            )
        names = _field_names(value)
        if names is None:
            raise InvalidFieldReferenceError(
                f"Field name {position!r} cannot select a field of {_describe(value)}: it has no "
                "field names; use an int position"
            )
        try:
            return list(names).index(position)
        except ValueError:
            raise InvalidFieldReferenceError(
                f"Field {position!r} does not exist in {_describe(value)}; its fields are "
                f"{list(names)}"
            ) from None
    if position == 0 and type(position) is int:
        return None
    raise InvalidFieldReferenceError(
        f"The {position!r} field selected on a basic type ({_describe(value)}). A field expression "
        "on a basic type can only select the 0th field (which means selecting the entire basic type)."
    )


def with_field(value: Any, index: int, new: Any) -> Any:
    """A copy of ``value`` (same container type) with field ``index`` set to ``new``."""
    t = type(value)
    if t is tuple:
        items = list(value)
        items[index] = new
        return tuple(items)
    if t is list:
        result = value.copy()
        result[index] = new
        return result
    if isinstance(value, tuple):  # named tuple or another tuple subclass
        items = list(value)
        items[index] = new
        make = getattr(t, "_make", None)
        return make(items) if make is not None else t(items)
    result = copy.copy(value)
    try:
        result[index] = new
    except TypeError as e:
        raise TypeError(
            f"Cannot set field {index} of {_describe(value)}: the type does not support item "
            "assignment, which aggregations need"
        ) from e
    return result


# -- aggregators ----------------------------------------------------------------------------

def _check_position(position: Any, what: str) -> Position:
    if type(position) is int:
        if position < 0:
            raise InvalidFieldReferenceError(f"The position to {what} must be >= 0, got {position}")
        return position
    if isinstance(position, str) and position:
        return position
    raise TypeError(
        f"The input must be of int or str type to locate the value to {what}, got {position!r} "
        f"of type {type(position).__name__}"
    )


class SumAggregator(ReduceFunction):
    """``KeyedStream.sum(position)`` (Flink's ``SumAggregator``).

    :param position: field position (``int`` >= 0) or name (``str``); default 0.
    :raises TypeError: if ``position`` is neither a non-negative ``int`` nor a non-empty
        ``str``.
    """

    def __init__(self, position: Position = 0) -> None:
        self.position = _check_position(position, "sum")
        self._int_position = position if type(position) is int else None

    def reduce(self, value1: Any, value2: Any) -> Any:
        p = self._int_position
        if p is not None and value1.__class__ is tuple and value2.__class__ is tuple:  # fast path
            try:
                total = value1[p] + value2[p]
            except IndexError:
                pass  # the general path raises the clear error
            except TypeError as e:
                raise self._add_error(value1, value2, e) from e
            else:
                if len(value1) == 2:  # (key, count) pairs: the common case
                    return (value1[0], total) if p == 1 else (total, value1[1])
                items = list(value1)
                items[p] = total
                return tuple(items)
        position = self.position
        i = field_index(value1, position)
        j = field_index(value2, position)
        try:
            if i is None:
                return value1 + (value2 if j is None else value2[j])
            total = value1[i] + (value2 if j is None else value2[j])
        except TypeError as e:
            raise self._add_error(value1, value2, e) from e
        return with_field(value1, i, total)

    def _add_error(self, value1: Any, value2: Any, e: Exception) -> TypeError:
        return TypeError(
            f"sum({self.position!r}): cannot add field {self.position!r} of {_describe(value1)} "
            f"and {_describe(value2)}: {e}"
        )

    def __repr__(self) -> str:
        return f"SumAggregator({self.position!r})"


class ComparableAggregator(ReduceFunction):
    """``KeyedStream.min/max/min_by/max_by(position)`` (Flink's ``ComparableAggregator``).

    :param position: field position (``int`` >= 0) or name (``str``).
    :param aggregation_type: ``MIN``, ``MAX``, ``MIN_BY`` or ``MAX_BY``.
    :param first: for ``MIN_BY``/``MAX_BY``: on a tie keep the first record (default) or take
        the last.
    :raises TypeError: for a bad ``position``; ``ValueError`` for ``AggregationType.SUM``.
    """

    def __init__(self, position: Position, aggregation_type: AggregationType, first: bool = True) -> None:
        if aggregation_type is AggregationType.SUM or not isinstance(aggregation_type, AggregationType):
            raise ValueError(f"ComparableAggregator does not do {aggregation_type!r}; use SumAggregator for sums")
        self.position = _check_position(position, aggregation_type.value)
        self._int_position = position if type(position) is int else None
        self.aggregation_type = aggregation_type
        self.first = first
        self._is_max = aggregation_type in (AggregationType.MAX, AggregationType.MAX_BY)
        self._by_aggregate = aggregation_type in (AggregationType.MIN_BY, AggregationType.MAX_BY)

    def reduce(self, value1: Any, value2: Any) -> Any:
        position = self.position
        p = self._int_position
        if p is not None and value1.__class__ is tuple and value2.__class__ is tuple \
                and p < len(value1) and p < len(value2):
            i = p
            o1 = value1[p]
            o2 = value2[p]
        else:
            i = field_index(value1, position)
            j = field_index(value2, position)
            o1 = value1 if i is None else value1[i]
            o2 = value2 if j is None else value2[j]
        try:
            extremal = o1 > o2 if self._is_max else o1 < o2
            if extremal:
                return value1
            if self._by_aggregate:
                if o1 == o2:
                    return value1 if self.first else value2
                return value2
        except TypeError as e:
            raise TypeError(
                f"{self.aggregation_type.value}({position!r}): cannot compare field {position!r} of "
                f"{_describe(value1)} and {_describe(value2)}: {e}"
            ) from e
        # MIN/MAX: the stored record with only the field replaced (also on a tie, as Flink)
        return o2 if i is None else with_field(value1, i, o2)

    def __repr__(self) -> str:
        return f"ComparableAggregator({self.position!r}, {self.aggregation_type.name}, first={self.first})"


class MinAggregator(ComparableAggregator):
    """``KeyedStream.min(position)``: see :class:`ComparableAggregator`."""

    def __init__(self, position: Position = 0) -> None:
        super().__init__(position, AggregationType.MIN)


class MaxAggregator(ComparableAggregator):
    """``KeyedStream.max(position)``: see :class:`ComparableAggregator`."""

    def __init__(self, position: Position = 0) -> None:
        super().__init__(position, AggregationType.MAX)


class MinByAggregator(ComparableAggregator):
    """``KeyedStream.min_by(position, first=True)``: see :class:`ComparableAggregator`."""

    def __init__(self, position: Position = 0, first: bool = True) -> None:
        super().__init__(position, AggregationType.MIN_BY, first)


class MaxByAggregator(ComparableAggregator):
    """``KeyedStream.max_by(position, first=True)``: see :class:`ComparableAggregator`."""

    def __init__(self, position: Position = 0, first: bool = True) -> None:
        super().__init__(position, AggregationType.MAX_BY, first)


def create_aggregator(aggregation_type: AggregationType, position: Position = 0, first: bool = True) -> ReduceFunction:
    """The reduce function of one ``KeyedStream`` aggregation, e.g.
    ``create_aggregator(AggregationType.MAX_BY, "score")``."""
    if aggregation_type is AggregationType.SUM:
        return SumAggregator(position)
    return ComparableAggregator(position, aggregation_type, first)

