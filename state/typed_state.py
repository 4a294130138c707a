"""Keyed state that applies its descriptor's declared type to what it stores.

Flink serializes keyed state with the serializer of the descriptor's type, so a value stored in
a ``ValueStateDescriptor("s", Types.FLOAT())`` reads back as a float32 (``110.1`` ->
``110.0999984741211``) and an out-of-range ``Types.INT()`` fails the write. Rill's heap backend
keeps Python objects, so :func:`apply_declared_type` gives a state whose type changes or checks
values a subclass that converts on write (see :mod:`rill.common.type_conversion`):

- value state: ``update(value)`` with the descriptor's type;
- list state: ``add``, ``add_all``, ``update`` with the element type;
- map state: ``put``, ``put_all`` with the key and value types.

Reducing and aggregating states are left as they are (their stored value is the output of the
user's reduce / aggregate function, converted in Flink on every merge; Rill does not emulate
that yet). A state whose type changes nothing (no type, ``STRING``, ``DOUBLE``...) is returned
unchanged and costs nothing per access.
"""

from __future__ import annotations

from typing import Any

from rill.common.type_conversion import value_converter
from rill.state.descriptors import StateDescriptor, StateType

__all__ = ["apply_declared_type"]


def apply_declared_type(state: Any, descriptor: StateDescriptor) -> Any:
    """``state`` itself, its class switched to a subclass converting written values by the
    declared type of ``descriptor`` when that type changes or checks any value.

    :param state: a keyed state object just created by a backend (heap or TTL state).
    :param descriptor: its descriptor.
    :returns: the same object.
    Writes then raise :class:`~rill.common.type_conversion.TypeValueError` naming the state,
    the value and the type for a value that does not fit.
    """
    where = f"state {descriptor.name!r}"
    kind = descriptor.state_type
    cls = type(state)
    if kind is StateType.VALUE:
        convert = value_converter(descriptor.type_info, f"{where} ({descriptor.type_info!r})")
        if convert is None:
            return state

        def update(self, value: Any) -> None:
            cls.update(self, convert(value))
        body = {"update": update}
    elif kind is StateType.LIST:
        elem_type = getattr(descriptor, "elem_type_info", descriptor.type_info)
        convert = value_converter(elem_type, f"{where} ({elem_type!r})")
        if convert is None:
            return state

        def add(self, value: Any) -> None:
            cls.add(self, convert(value))

        def add_all(self, values: Any) -> None:
            cls.add_all(self, [convert(v) for v in values])

        def update_list(self, values: Any) -> None:
            cls.update(self, None if values is None else [convert(v) for v in values])
        body = {"add": add, "add_all": add_all, "update": update_list}
    elif kind is StateType.MAP:
        key_type = getattr(descriptor, "key_type_info", None)
        value_type = getattr(descriptor, "value_type_info", None)
        convert_key = value_converter(key_type, f"{where}, key ({key_type!r})")
        convert_value = value_converter(value_type, f"{where}, value ({value_type!r})")
        if convert_key is None and convert_value is None:
            return state
        convert_key = convert_key or (lambda k: k)
        convert_value = convert_value or (lambda v: v)

        def put(self, key: Any, value: Any) -> None:
            cls.put(self, convert_key(key), convert_value(value))

        def put_all(self, dict_value: Any) -> None:
            cls.put_all(self, {convert_key(k): convert_value(v) for k, v in dict_value.items()})
        body = {"put": put, "put_all": put_all}
    else:
        return state
    body["__slots__"] = ()
    body["__doc__"] = f"{cls.__name__} converting written values by their declared type."
    state.__class__ = type(f"Typed{cls.__name__}", (cls,), body)
    return state
