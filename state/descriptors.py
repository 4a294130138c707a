"""State descriptors: the name, kind and functions of a keyed state, with PyFlink's names
(``pyflink.datastream.state``: ``ValueStateDescriptor``, ``ListStateDescriptor``, ...).

A descriptor is a specification, not state: it is created in user code (usually in
``Function.open``) and handed to the keyed state backend, which creates or returns the live
state object registered under the descriptor's name. Two descriptors are equal when they are of
the same class and have the same name (as Flink's ``StateDescriptor.equals``).

Type information is optional and only recorded: the heap backend stores Python objects as they
are. Snapshots (a later issue) use it to write typed Parquet columns.
"""

from __future__ import annotations

import enum
from typing import Any, Callable, Union

from rill.common.functions import AggregateFunction, ReduceFunction

__all__ = [
    "StateType",
    "StateDescriptor",
    "ValueStateDescriptor",
    "ListStateDescriptor",
    "MapStateDescriptor",
    "ReducingStateDescriptor",
    "AggregatingStateDescriptor",
]


class StateType(enum.Enum):
    """The kind of a state (Flink's ``StateDescriptor.Type``)."""

    VALUE = "VALUE"
    LIST = "LIST"
    MAP = "MAP"
    REDUCING = "REDUCING"
    AGGREGATING = "AGGREGATING"


class StateDescriptor:
    """Base of all state descriptors (Flink's ``StateDescriptor``).

    :param name: the state's name, unique per operator; a non-empty ``str``.
    :param type_info: optional type information of the stored value.
    :raises TypeError: if ``name`` is not a ``str``.
    :raises ValueError: if ``name`` is empty.
    """

    #: the kind of state this descriptor creates; set by each subclass
    state_type: StateType

    def __init__(self, name: str, type_info: Any = None) -> None:
        if not isinstance(name, str):
            raise TypeError(
                f"{type(self).__name__}: state name must be a str, got {name!r} of type "
                f"{type(name).__name__}"
            )
        if not name:
            raise ValueError(f"{type(self).__name__}: state name must not be empty")
        self.name = name
        self.type_info = type_info
        self._ttl_config: Any = None

    def get_name(self) -> str:
        """The state's name."""
        return self.name

    def enable_time_to_live(self, ttl_config: Any) -> None:
        """Switch on state time-to-live with ``ttl_config``, a
        :class:`~rill.state.ttl.StateTtlConfig` (Flink's ``enableTimeToLive``): the keyed state
        backend then creates a TTL state (see :mod:`rill.state.ttl`) unless the config's update
        type is ``Disabled``. TTL applies to keyed state only; the operator state backend
        refuses descriptors with TTL.

        The configuration is only recorded here; the backend raises ``TypeError`` when it
        creates the state if ``ttl_config`` is not a ``StateTtlConfig``.

        :raises TypeError: if ``ttl_config`` is ``None``.
        """
        if ttl_config is None:
            raise TypeError(f"{self!r}: ttl_config must not be None")
        self._ttl_config = ttl_config

    def get_ttl_config(self) -> Any:
        """The TTL configuration given to :meth:`enable_time_to_live`, or ``None``."""
        return self._ttl_config

    @property
    def ttl_config(self) -> Any:
        """Same as :meth:`get_ttl_config`."""
        return self._ttl_config

    def is_ttl_enabled(self) -> bool:
        """Whether :meth:`enable_time_to_live` was called."""
        return self._ttl_config is not None

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.name == self.name  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.name))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class ValueStateDescriptor(StateDescriptor):
    """Describes a :class:`~rill.state.api.ValueState` (Flink's ``ValueStateDescriptor``).

    :param name: see :class:`StateDescriptor`.
    :param value_type_info: optional type of the value.
    """

    state_type = StateType.VALUE

    def __init__(self, name: str, value_type_info: Any = None) -> None:
        super().__init__(name, value_type_info)


class ListStateDescriptor(StateDescriptor):
    """Describes a :class:`~rill.state.api.ListState` (Flink's ``ListStateDescriptor``).

    :param name: see :class:`StateDescriptor`.
    :param elem_type_info: optional type of the list's elements.
    """

    state_type = StateType.LIST

    def __init__(self, name: str, elem_type_info: Any = None) -> None:
        super().__init__(name, elem_type_info)
        self.elem_type_info = elem_type_info


class MapStateDescriptor(StateDescriptor):
    """Describes a :class:`~rill.state.api.MapState` (Flink's ``MapStateDescriptor``).

    :param name: see :class:`StateDescriptor`.
    :param key_type_info: optional type of the map's keys.
    :param value_type_info: optional type of the map's values.
    """

    state_type = StateType.MAP

    def __init__(self, name: str, key_type_info: Any = None, value_type_info: Any = None) -> None:
        super().__init__(name, None)
        self.key_type_info = key_type_info
        self.value_type_info = value_type_info


class ReducingStateDescriptor(StateDescriptor):
    """Describes a :class:`~rill.state.api.ReducingState` (Flink's ``ReducingStateDescriptor``).

    :param name: see :class:`StateDescriptor`.
    :param reduce_function: a ``ReduceFunction`` (any object with a callable ``reduce(a, b)``,
        which is called) or a plain callable ``f(a, b)``.
    :param type_info: optional type of the reduced value.
    :raises TypeError: if ``reduce_function`` is neither; the message names the descriptor.
    """

    state_type = StateType.REDUCING

    def __init__(
        self,
        name: str,
        reduce_function: Union["ReduceFunction", Callable[[Any, Any], Any]],
        type_info: Any = None,
    ) -> None:
        super().__init__(name, type_info)
        reduce = getattr(reduce_function, "reduce", None)
        if not callable(reduce):
            if not callable(reduce_function):
                raise TypeError(
                    f"{self!r} expects a ReduceFunction or a callable, got {reduce_function!r} "
                    f"of type {type(reduce_function).__name__}"
                )
            reduce = reduce_function
        self._reduce_function = reduce_function
        #: the callable ``reduce(a, b)`` the state calls: the function's bound ``reduce``
        #: method, or the plain callable itself
        self.reduce_callable: Callable[[Any, Any], Any] = reduce

    def get_reduce_function(self) -> Union["ReduceFunction", Callable[[Any, Any], Any]]:
        """The reduce function as given (a ``ReduceFunction`` or a plain callable)."""
        return self._reduce_function


_AGGREGATE_METHODS = ("create_accumulator", "add", "get_result")


class AggregatingStateDescriptor(StateDescriptor):
    """Describes an :class:`~rill.state.api.AggregatingState`
    (Flink's ``AggregatingStateDescriptor``).

    :param name: see :class:`StateDescriptor`.
    :param agg_function: an ``AggregateFunction``, or any object with callable
        ``create_accumulator()``, ``add(value, acc)`` and ``get_result(acc)``.
    :param state_type_info: optional type of the accumulator.
    :raises TypeError: if ``agg_function`` lacks one of these methods; the message names the
        descriptor and the missing method.
    """

    state_type = StateType.AGGREGATING

    def __init__(self, name: str, agg_function: "AggregateFunction", state_type_info: Any = None) -> None:
        super().__init__(name, state_type_info)
        for method in _AGGREGATE_METHODS:
            if not callable(getattr(agg_function, method, None)):
                raise TypeError(
                    f"{self!r} expects an AggregateFunction, got {agg_function!r} of type "
                    f"{type(agg_function).__name__} without a {method}() method"
                )
        self._agg_function = agg_function

    def get_agg_function(self) -> "AggregateFunction":
        """The aggregate function."""
        return self._agg_function
