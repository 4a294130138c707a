"""``StreamingRuntimeContext``: the ``RuntimeContext`` an operator gives its user function
(Flink's ``org.apache.flink.streaming.api.operators.StreamingRuntimeContext``)."""

from __future__ import annotations

from typing import Any, Dict, Optional

from rill.common.functions import RuntimeContext
from rill import state as _state_module
from rill.operators.context import StreamOperatorContext

__all__ = ["StreamingRuntimeContext"]

#: Flink's message (``StreamingRuntimeContext.checkPreconditionsAndGetKeyedStateStore``).
_KEYED_STATE_ONLY = "Keyed state can only be used on a 'keyed stream', i.e., after a 'keyBy()' operation."


class StreamingRuntimeContext(RuntimeContext):
    """Subtask facts and keyed state for user functions, read from the operator's
    :class:`~rill.operators.context.StreamOperatorContext`.

    Keyed state is scoped to the key of the record being processed (or of the firing timer):
    the operator sets it on the backend before calling the function.

    :param context: the operator's context.
    """

    def __init__(self, context: StreamOperatorContext) -> None:
        self._context = context

    # -- subtask facts --------------------------------------------------------------------
    def get_task_name(self) -> str:
        """The task's (vertex') name, e.g. ``"Map -> Filter"``."""
        return self._context.task_name

    def get_number_of_parallel_subtasks(self) -> int:
        return self._context.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        """The max parallelism (number of key groups)."""
        return self._context.max_parallelism

    def get_index_of_this_subtask(self) -> int:
        """0-based."""
        return self._context.subtask_index

    def get_attempt_number(self) -> int:
        """0 for the first execution attempt."""
        return self._context.attempt_number

    def is_checkpointing_enabled(self) -> bool:
        """Whether the job takes checkpoints (Flink's
        ``StreamingRuntimeContext.isCheckpointingEnabled``)."""
        return self._context.checkpointing_enabled

    def get_task_name_with_subtasks(self) -> str:
        """``"<task name> (<index + 1>/<parallelism>)"``, e.g. ``"Map (2/4)"``."""
        return self._context.task_name_with_subtasks

    def get_job_parameter(self, key: str, default_value: Optional[str] = None) -> Optional[str]:
        """A global job parameter (PyFlink's ``get_job_parameter``)."""
        return self._context.job_parameters.get(key, default_value)

    def get_job_parameters(self) -> Dict[str, str]:
        """A copy of all global job parameters."""
        return dict(self._context.job_parameters)

    def get_metrics_group(self) -> Any:
        """The operator's metrics (``OperatorMetrics``), or ``None`` where none are kept."""
        return self._context.metrics

    # -- keyed state ----------------------------------------------------------------------
    def _backend(self) -> Any:
        backend = self._context.keyed_state_backend
        if backend is None:
            raise RuntimeError(f"{_KEYED_STATE_ONLY} (operator '{self._context.operator_name}')")
        return backend

    def _state(self, descriptor: Any, kind: str) -> Any:
        expected = getattr(_state_module, kind)
        if not isinstance(descriptor, expected):
            raise TypeError(
                f"{_GETTERS[kind]} expects a {kind}, got {descriptor!r} of type "
                f"{type(descriptor).__name__} (operator '{self._context.operator_name}')"
            )
        return self._backend().get_or_create_keyed_state(descriptor)

    def get_state(self, state_descriptor: Any) -> Any:
        """The ``ValueState`` of ``state_descriptor`` (a ``ValueStateDescriptor``).

        :raises RuntimeError: on a non-keyed operator (Flink's message, naming the operator).
        :raises TypeError: for another kind of descriptor.
        :raises ValueError: if the name is registered with another kind of state.
        """
        return self._state(state_descriptor, "ValueStateDescriptor")

    def get_list_state(self, state_descriptor: Any) -> Any:
        """The ``ListState`` of a ``ListStateDescriptor``; errors as :meth:`get_state`."""
        return self._state(state_descriptor, "ListStateDescriptor")

    def get_map_state(self, state_descriptor: Any) -> Any:
        """The ``MapState`` of a ``MapStateDescriptor``; errors as :meth:`get_state`."""
        return self._state(state_descriptor, "MapStateDescriptor")

    def get_reducing_state(self, state_descriptor: Any) -> Any:
        """The ``ReducingState`` of a ``ReducingStateDescriptor``; errors as :meth:`get_state`."""
        return self._state(state_descriptor, "ReducingStateDescriptor")

    def get_aggregating_state(self, state_descriptor: Any) -> Any:
        """The ``AggregatingState`` of an ``AggregatingStateDescriptor``; errors as
        :meth:`get_state`."""
        return self._state(state_descriptor, "AggregatingStateDescriptor")

    def __repr__(self) -> str:
        return f"StreamingRuntimeContext({self._context.task_name_with_subtasks!r})"


_GETTERS = {
    "ValueStateDescriptor": "get_state",
    "ListStateDescriptor": "get_list_state",
    "MapStateDescriptor": "get_map_state",
    "ReducingStateDescriptor": "get_reducing_state",
    "AggregatingStateDescriptor": "get_aggregating_state",
}
