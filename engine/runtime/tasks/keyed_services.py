"""Creates the per-operator keyed services a task gives a keyed operator: the heap keyed
state backend over the subtask's key-group range, the timer services, and the user-facing
``RuntimeContext`` (Flink's ``StreamTaskStateInitializer``)."""

from __future__ import annotations

from rill.operators.context import StreamOperatorContext
from rill.operators.runtime_context import StreamingRuntimeContext
from rill.operators.timer_service import InternalTimeServiceManager
from rill.state.heap import HeapKeyedStateBackend
from rill.state.operator_state import DefaultOperatorStateBackend
from rill.state.key_groups import compute_key_group_range_for_operator_index

__all__ = ["create_keyed_services"]


def create_keyed_services(ctx: StreamOperatorContext) -> StreamOperatorContext:
    """Fill ``keyed_state_backend``, ``timer_service_manager`` (keyed operators only),
    ``operator_state_backend`` and ``runtime_context`` of ``ctx`` in place; returns ``ctx``."""
    if ctx.key_selector is not None or ctx.key_selector2 is not None:
        key_groups = compute_key_group_range_for_operator_index(
            ctx.max_parallelism, ctx.parallelism, ctx.subtask_index)
        backend = HeapKeyedStateBackend(key_groups, ctx.max_parallelism)
        ctx.keyed_state_backend = backend
        ctx.timer_service_manager = InternalTimeServiceManager(
            key_groups, backend, ctx.processing_time_service)
    ctx.operator_state_backend = DefaultOperatorStateBackend(ctx.operator_name)
    ctx.runtime_context = StreamingRuntimeContext(ctx)
    return ctx
