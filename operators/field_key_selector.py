"""``FieldKeySelector``: the key selector of ``key_by(position)`` and ``key_by("name")``
(Flink's ``keyBy(int...)``/``keyBy(String...)`` with one field, whose
``KeySelectorUtil.getSelectorForOneKey`` returns the field itself, not a ``Tuple1``).

Fields are located as the aggregations locate them (:func:`rill.operators.aggregations.field_index`,
Flink's ``FieldAccessor``): a position on tuples, lists and Rows, a name on named tuples and
Rows, position 0 on a basic type selects the whole value.

``get_keys`` keys a whole batch without a Python call per record when it can: a batch of
tuples/lists keyed by position goes through ``map(operator.itemgetter(position), values)``;
anything else (Rows, names, scalars, a record too short) is keyed record by record, which
raises the clear error.
"""

from __future__ import annotations

import operator
from typing import Any, List, Union

from rill.common.functions import KeySelector
from rill.operators.aggregations import InvalidFieldReferenceError, field_index

__all__ = ["FieldKeySelector"]

_SEQUENCES = frozenset((tuple, list))


class FieldKeySelector(KeySelector):
    """Key = the field at ``position`` (``int`` >= 0) or named ``position`` (``str``).

    :raises TypeError: if ``position`` is neither a non-negative ``int`` nor a non-empty
        ``str`` (``bool`` is not a position).
    :raises InvalidFieldReferenceError: (a ``ValueError``) from :meth:`get_key`/:meth:`get_keys`
        when a record has no such field; the message names the position and the record.
    """

    def __init__(self, position: Union[int, str]) -> None:
        if type(position) is int:
            if position < 0:
                raise InvalidFieldReferenceError(f"key_by: the key's position must be >= 0, got {position}")
        elif not (isinstance(position, str) and position):
            raise TypeError(
                f"key_by: a field key must be an int position or a field name, got {position!r} of type "
                f"{type(position).__name__}"
            )
        self.position = position
        self._getter = operator.itemgetter(position) if type(position) is int else None

    def get_key(self, value: Any) -> Any:
        i = field_index(value, self.position)
        return value if i is None else value[i]

    def get_keys(self, values: List[Any]) -> List[Any]:
        """The keys of a batch, in order (see the module docstring)."""
        getter = self._getter
        if getter is not None and set(map(type, values)) <= _SEQUENCES:
            try:
                return list(map(getter, values))
            except IndexError:
                pass  # a record too short: get_key raises the clear error
        return list(map(self.get_key, values))

    def __repr__(self) -> str:
        return f"FieldKeySelector({self.position!r})"
