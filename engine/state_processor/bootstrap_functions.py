"""The user functions that bootstrap state into a new savepoint (Flink's
``org.apache.flink.state.api.functions``): :class:`KeyedStateBootstrapFunction` for keyed state
and timers, :class:`StateBootstrapFunction` for operator list / union state and
:class:`BroadcastStateBootstrapFunction` for broadcast state.

Each runs on a Spark executor, one instance per subtask of the operator being written
(:mod:`rill.state_processor.bootstrap_tasks`): ``open(runtime_context)`` first (register keyed
state there, as in a job), then ``process_element(value, ctx)`` once per row of the subtask's
share of the DataFrame (a ``pyspark.sql.Row``), then the state is snapshotted into the
savepoint's Parquet files. Nothing a function emits goes anywhere: bootstrap functions have no
output, as Flink's.
"""

from __future__ import annotations

import abc
from typing import Any

from rill.common.functions import Function, TimerService
from rill.operators.checkpointed_function import CheckpointedFunction

__all__ = ["KeyedStateBootstrapFunction", "StateBootstrapFunction", "BroadcastStateBootstrapFunction"]


class KeyedStateBootstrapFunction(Function):
    """Writes keyed state, one row at a time, with the row's key current (Flink's
    ``KeyedStateBootstrapFunction<K, IN>``).

    ``open(runtime_context)`` registers the states with ``runtime_context.get_state(descriptor)``
    (``get_list_state``, ``get_map_state``, ``get_reducing_state``, ``get_aggregating_state``):
    use the job's state names and kinds, so that the job restores them. ``process_element``
    updates them for the row's key; ``ctx.timer_service()`` registers timers, which the job's
    ``KeyedProcessFunction`` receives (they are written to its ``"user-timers"`` service).
    """

    class Context(abc.ABC):
        """What ``process_element`` sees besides the row (Flink's
        ``KeyedStateBootstrapFunction.Context``)."""

        @abc.abstractmethod
        def timer_service(self) -> TimerService:
            """The timer service of the key (epoch ms; processing time is the executor's wall
            clock, the watermark ``MIN_TIMESTAMP``): timers registered here are written to the
            savepoint and fire in the restored job."""

        @abc.abstractmethod
        def get_current_key(self) -> Any:
            """The key of the row being processed."""

    @abc.abstractmethod
    def process_element(self, value: Any, ctx: "KeyedStateBootstrapFunction.Context") -> None:
        """Write the state of one row (``value``, a ``pyspark.sql.Row``) for its key."""


class StateBootstrapFunction(Function, CheckpointedFunction):
    """Writes operator state (list or union list state) of one subtask (Flink's
    ``StateBootstrapFunction<IN>``, a ``CheckpointedFunction``).

    ``initialize_state(context)`` registers the states through
    ``context.get_operator_state_store()`` (``get_list_state`` / ``get_union_list_state``);
    ``process_element`` is called per row of the subtask's partition of the DataFrame; then
    ``snapshot_state(context)`` writes what must be kept into the registered states, and they
    are written to the savepoint. A subtask is one partition of the DataFrame.
    """

    class Context(abc.ABC):
        """Flink's ``StateBootstrapFunction.Context``."""

        @abc.abstractmethod
        def current_processing_time(self) -> int:
            """The executor's wall clock, epoch ms."""

    @abc.abstractmethod
    def process_element(self, value: Any, ctx: "StateBootstrapFunction.Context") -> None:
        """Process one row (a ``pyspark.sql.Row``)."""


class BroadcastStateBootstrapFunction(Function):
    """Writes broadcast state (Flink's ``BroadcastStateBootstrapFunction<IN>``):
    ``process_element(value, ctx)`` with ``ctx.get_broadcast_state(MapStateDescriptor)``.

    Broadcast state is the same in every subtask, so Rill writes it from one task that sees the
    whole DataFrame (one subtask; a restore copies it to every subtask of the job).
    """

    class Context(abc.ABC):
        """Flink's ``BroadcastStateBootstrapFunction.Context``."""

        @abc.abstractmethod
        def current_processing_time(self) -> int:
            """The executor's wall clock, epoch ms."""

        @abc.abstractmethod
        def get_broadcast_state(self, descriptor: Any) -> Any:
            """The writable ``BroadcastState`` of ``descriptor`` (a ``MapStateDescriptor``).

            :raises TypeError: for another kind of descriptor."""

    @abc.abstractmethod
    def process_element(self, value: Any, ctx: "BroadcastStateBootstrapFunction.Context") -> None:
        """Process one row (a ``pyspark.sql.Row``)."""
