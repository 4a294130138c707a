"""Reading one key's keyed state by its descriptor name, for queryable state (Flink's
``KvStateRegistry`` lookup plus ``InternalKvState.getSerializedValue``, without the bytes).

The runtime (:mod:`rill.runtime.queryable_state`) finds the subtask that owns a key's key group
and runs :func:`read_keyed_state` on that task's thread, through a mail: the state is only ever
read on the thread that writes it, so a value is consistent per key (never half an update).

Errors are the :class:`QueryableStateError` family, each naming the operator, the state and the
rule broken.
"""

from __future__ import annotations

from typing import Any

from rill.state.api import VOID_NAMESPACE
from rill.state.backend import KeyedStateBackend
from rill.state.descriptors import StateType

__all__ = [
    "QueryableStateError",
    "UnknownOperatorUidError",
    "UnknownStateNameError",
    "NotKeyedOperatorError",
    "JobNotRunningError",
    "read_keyed_state",
]


class QueryableStateError(Exception):
    """Base of the errors of a queryable-state request (Flink's ``UnknownKvStateLocation``,
    ``UnknownKvStateIdException`` and friends)."""


class UnknownOperatorUidError(QueryableStateError, LookupError):
    """No operator of the job has the ``uid`` asked for (the uid set with ``.uid(...)``)."""


class UnknownStateNameError(QueryableStateError, LookupError):
    """The operator has no keyed state registered under the name asked for (a state is
    registered when the function first asks for it, usually in ``open``)."""


class NotKeyedOperatorError(QueryableStateError, TypeError):
    """The operator with that uid has no keyed state (it does not follow a ``key_by``)."""


class JobNotRunningError(QueryableStateError, RuntimeError):
    """The job, or the task owning the key, is not running (not yet deployed, finished,
    cancelled or failed): its state can no longer be asked."""


def read_keyed_state(backend: KeyedStateBackend, state_name: str, key: Any, operator_name: str = "") -> Any:
    """The value of state ``state_name`` for ``key`` in the default (void) namespace, as the
    function sees it: a ValueState's ``value()``, a ListState's list, a MapState's dict, a
    Reducing/AggregatingState's ``get()``; ``None`` when the key has no entry (Flink raises
    ``UnknownKeyOrNamespaceException`` there; a service wants a plain "nothing yet").

    TTL states answer as their ``value()``/``get()`` do: an expired value is ``None``, and a
    state whose TTL ``update_type`` is ``OnReadAndWrite`` counts the query as a read (its
    timestamp is refreshed; Flink's queryable state reads the serialized value and does not).
    Task thread only: it sets the backend's current key to ``key`` and back to the key that
    was current before (an operator that yields to mails in the middle of a record keeps its
    key).

    :param operator_name: for error messages.
    :raises UnknownStateNameError: if no state of that name is registered in ``backend``.
    :raises UnsupportedKeyError: if ``key`` has no stable hash.
    :raises ValueError: if ``key``'s group is not in this backend's range (asked of the wrong
        subtask).
    """
    names = backend.get_registered_state_names()
    if state_name not in names:
        raise UnknownStateNameError(
            f"Operator '{operator_name}' has no keyed state named {state_name!r} (registered so far: "
            f"{sorted(names)}); a state is registered when the function first asks for it, with "
            "the descriptor's name")
    # the RocksDB backend names its descriptors; the heap backend's are on its state tables
    describe = getattr(backend, "get_state_descriptor", None)
    descriptor = describe(state_name) if describe is not None else backend.get_state_table(state_name).descriptor
    previous = backend.get_current_key()
    had_key = previous is not None
    backend.set_current_key(key)
    try:
        state = backend.get_partitioned_state(VOID_NAMESPACE, descriptor)
        kind = descriptor.state_type
        if kind is StateType.VALUE:
            return state.value()
        if kind is StateType.LIST:
            values = list(state.get())
            return values or None
        if kind is StateType.MAP:
            if state.is_empty():
                return None
            return dict(state.items())
        return state.get()  # REDUCING, AGGREGATING
    finally:
        if had_key:
            backend.set_current_key(previous)
