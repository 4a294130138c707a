"""``StreamExecutionEnvironment``: where a DataStream program starts and is executed
(PyFlink's ``pyflink.datastream.StreamExecutionEnvironment``)."""

from __future__ import annotations

import logging
from typing import Any, Callable, List, Optional, Sequence

from rill.common.checkpointing_options import CheckpointingMode, CheckpointingOptions
from rill.common.configuration import ConfigOptions, Configuration, load_configuration
from rill.common.execution_options import (
    ExecutionOptions,
    RuntimeExecutionMode,
    configured_runtime_mode,
    effective_runtime_mode,
    runtime_mode_of,
)
from rill.common.execution_config import ExecutionConfig
from rill.common.job_execution_result import JobExecutionResult
from rill.common.restart_strategy import RestartStrategyConfiguration
from rill.common.state_backend_options import validate_state_backend
from rill.datastream.checkpoint_config import CheckpointConfig
from rill.datastream.state_backend import StateBackend
from rill.datastream.connectors.collection import CollectionSource, NumberSequenceSource
from rill.datastream.connectors.file_system import FileSource, StreamFormat
from rill.common.connector.source import Source
from rill.common.functions import SourceFunction
from rill.common.io import InputFormat
from rill.datastream.connectors.source_function import SourceFunctionSource
from rill.common.row import Row
from rill.common.typeinfo import RowTypeInfo
from rill.common.watermark_strategy import WatermarkStrategy
from rill.graph.stream_graph_generator import StreamGraphGenerator
from rill.runtime.executiongraph.failover.restart_backoff_time_strategy import (
    restart_backoff_time_strategy_from_configuration,
)
from rill.runtime.executor import submit_job
from rill.datastream.data_stream import DataStream
from rill.graph.transformations import (
    SourceTransformation,
    Transformation,
    id_counter,
    validate_max_parallelism,
    validate_parallelism,
)
from rill.operators.factory import SimpleOperatorFactory
from rill.operators.source_operator import SourceOperator

__all__ = ["StreamExecutionEnvironment", "RuntimeExecutionMode"]

_LOG = logging.getLogger(__name__)


# Set by `rill run` / `rill plan` (Flink's StreamContextEnvironment / OptimizerPlanEnvironment):
# a hook that decides what execute() does for programs started from the CLI.
_context: Optional[Any] = None


def _set_context(context: Optional[Any]) -> None:
    global _context
    _context = context


class StreamExecutionEnvironment:
    """Builds a job from DataStream calls and runs it.

    Configuration precedence: option defaults, the config file, ``RILL_*`` environment
    variables, the ``configuration`` passed here, then setter calls such as
    :meth:`set_parallelism`.
    """

    def __init__(self, configuration: Optional[Configuration] = None):
        self._config = load_configuration(configuration)
        self._parallelism = self._config.get(ConfigOptions.PARALLELISM_DEFAULT)
        validate_parallelism(self._parallelism, "<environment default>")
        self._max_parallelism = self._config.get(ConfigOptions.MAX_PARALLELISM)
        self._chaining = self._config.get(ConfigOptions.OPERATOR_CHAINING)
        self._buffer_timeout_ms = self._config.get(ConfigOptions.BUFFER_TIMEOUT)
        self._transformations: List[Transformation] = []
        self._new_id: Callable[[], int] = id_counter()
        self._execution_config = ExecutionConfig(self._config)
        if _context is not None:
            _context.configure(self)

    @staticmethod
    def get_execution_environment(configuration: Optional[Configuration] = None) -> "StreamExecutionEnvironment":
        return StreamExecutionEnvironment(configuration)

    # -- settings --------------------------------------------------------------------------
    def get_config(self) -> ExecutionConfig:
        """The job's ``ExecutionConfig`` (auto-watermark interval, global job parameters)."""
        return self._execution_config

    def set_global_job_parameters(self, params: dict) -> "StreamExecutionEnvironment":
        self._execution_config.set_global_job_parameters(params)
        return self

    def get_global_job_parameters(self) -> dict:
        return self._execution_config.get_global_job_parameters()

    def get_configuration(self) -> Configuration:
        return self._config

    def configure(self, configuration: Configuration) -> "StreamExecutionEnvironment":
        self._config.add_all(configuration)
        if configuration.contains_key(ConfigOptions.PARALLELISM_DEFAULT.key):
            self.set_parallelism(self._config.get(ConfigOptions.PARALLELISM_DEFAULT))
        return self

    def set_parallelism(self, parallelism: int) -> "StreamExecutionEnvironment":
        validate_parallelism(parallelism, "<environment default>")
        if parallelism == -1:
            raise ValueError("The default parallelism of the environment must be at least 1, got -1.")
        self._parallelism = parallelism
        return self

    def get_parallelism(self) -> int:
        return self._parallelism

    def set_max_parallelism(self, max_parallelism: int) -> "StreamExecutionEnvironment":
        validate_max_parallelism(max_parallelism, "<environment default>")
        self._max_parallelism = max_parallelism
        return self

    def get_max_parallelism(self) -> int:
        return self._max_parallelism

    def disable_operator_chaining(self) -> "StreamExecutionEnvironment":
        self._chaining = False
        return self

    def is_chaining_enabled(self) -> bool:
        return self._chaining

    def set_buffer_timeout(self, timeout_millis: int) -> "StreamExecutionEnvironment":
        """ms a partly filled buffer waits before it is flushed (0: after every record, -1:
        only when full). Flink's ``execution.buffer-timeout``, default 100 ms."""
        if not isinstance(timeout_millis, int) or timeout_millis < -1:
            raise ValueError(f"Buffer timeout must be -1, 0 or a positive number of ms, got {timeout_millis!r}")
        self._buffer_timeout_ms = timeout_millis
        return self

    def get_buffer_timeout(self) -> int:
        return self._buffer_timeout_ms

    def set_runtime_mode(self, mode: RuntimeExecutionMode) -> "StreamExecutionEnvironment":
        """Run the program in ``mode`` (writes ``execution.runtime-mode``): ``STREAMING`` (the
        default), ``BATCH`` (bounded programs: keyed input processed key by key, final results
        only, timers firing at the end of each key, no watermarks but the final one, no
        checkpoints) or ``AUTOMATIC`` (BATCH when every source is bounded). See
        ``rill.graph.batch_translation``.

        :param mode: a ``RuntimeExecutionMode`` (or its name).
        :raises ValueError: for anything else, naming the value. A BATCH program with an
            unbounded source fails when its graph is built (``execute``), naming the source.
        """
        mode = runtime_mode_of(mode, "StreamExecutionEnvironment.set_runtime_mode")
        self._config.set(ExecutionOptions.RUNTIME_MODE, mode.name)
        return self

    def get_runtime_mode(self) -> RuntimeExecutionMode:
        """The configured mode (``AUTOMATIC`` stays ``AUTOMATIC``; the StreamGraph's
        ``runtime_mode`` is the mode chosen).

        :raises ValueError: if ``execution.runtime-mode`` names no mode.
        """
        return configured_runtime_mode(self._config)

    # -- PyFlink settings Rill does not have yet: a clear error instead of AttributeError -----
    def _not_yet(self, what: str, why: str) -> None:
        raise NotImplementedError(f"StreamExecutionEnvironment.{what} is not implemented in Rill yet: {why}")

    def enable_checkpointing(self, interval: int, mode: Optional[CheckpointingMode] = None) -> "StreamExecutionEnvironment":
        """Checkpoint the job every ``interval`` ms, in ``mode`` (EXACTLY_ONCE unless given):
        writes ``execution.checkpointing.interval`` (and ``.mode``) of the job's configuration.

        :raises ValueError: for an interval under 10 ms (Flink's rule).
        :raises TypeError: for a ``mode`` that is not a ``CheckpointingMode``.
        """
        config = self.get_checkpoint_config()
        config.set_checkpoint_interval(interval)
        if mode is not None:
            config.set_checkpointing_mode(mode)
        return self

    def get_checkpoint_interval(self) -> int:
        """ms between checkpoints, or -1 while checkpointing is disabled (shorthand for
        ``get_checkpoint_config().get_checkpoint_interval()``)."""
        return self.get_checkpoint_config().get_checkpoint_interval()

    def get_checkpointing_mode(self) -> CheckpointingMode:
        """Shorthand for ``get_checkpoint_config().get_checkpointing_mode()``."""
        return self.get_checkpoint_config().get_checkpointing_mode()

    def get_checkpoint_config(self) -> CheckpointConfig:
        """The job's checkpointing settings, a view that reads and writes this environment's
        ``Configuration`` (Flink 2.x)."""
        return CheckpointConfig(self._config)

    def set_state_backend(self, state_backend: StateBackend) -> "StreamExecutionEnvironment":
        """How the job's state is held: writes ``state_backend``'s ``state.backend.type`` into the
        job's Configuration (Flink 1.x's ``setStateBackend``; PyFlink 2.x sets the key).

        :raises TypeError: naming the value, when it is not a ``StateBackend``.
        """
        if not isinstance(state_backend, StateBackend):
            raise TypeError(f"StreamExecutionEnvironment.set_state_backend needs a StateBackend, got {state_backend!r}")
        self._config.add_all(state_backend.to_configuration())
        return self

    def get_state_backend(self) -> StateBackend:
        """The backend the Configuration chooses (``HashMapStateBackend`` unless set).

        :raises NotImplementedError/ValueError: for a ``state.backend.type`` Rill does not have.
        """
        return StateBackend.from_configuration(self._config)

    def set_restart_strategy(self, restart_strategy_configuration: RestartStrategyConfiguration) \
            -> "StreamExecutionEnvironment":
        """Choose the job's restart strategy: writes the configuration's ``restart-strategy.*``
        keys into the job's Configuration (Flink 2.x's way; the method is Flink 1.x's
        ``setRestartStrategy``, removed by FLINK-36249). ``fall_back_restart()`` writes nothing.

        :param restart_strategy_configuration: from ``rill.common.RestartStrategies``.
        :raises TypeError: naming the value, when it is not a ``RestartStrategyConfiguration``.
        """
        if not isinstance(restart_strategy_configuration, RestartStrategyConfiguration):
            raise TypeError("StreamExecutionEnvironment.set_restart_strategy expects a RestartStrategyConfiguration "
                            f"(from RestartStrategies), got {restart_strategy_configuration!r}")
        self._config.add_all(restart_strategy_configuration.to_configuration())
        return self

    def add_jars(self, *jars_path: str) -> None:
        """:raises NotImplementedError: always (Rill runs Python only)."""
        self._not_yet("add_jars", "Rill runs no JVM code")

    def add_python_file(self, file_path: str) -> None:
        """:raises NotImplementedError: always (functions ship with cloudpickle; in the
        embedded mode the job runs in the caller's process, whose modules it sees)."""
        self._not_yet("add_python_file", "functions ship with cloudpickle, no file shipping")

    # -- sources ---------------------------------------------------------------------------
    def _add_operator(self, transformation: Transformation) -> None:
        self._transformations.append(transformation)

    def from_source(self, source: Source, watermark_strategy: Any = None, source_name: str = "Custom Source",
                    type_info: Any = None) -> DataStream:
        """A stream read by a ``Source`` (bounded or unbounded, split across subtasks).

        With a ``WatermarkStrategy`` the source subtasks assign timestamps and generate
        watermarks themselves (one generator per subtask, see ``SourceOperator``).

        :raises TypeError: if ``source`` is not a ``Source`` or ``watermark_strategy`` is not a
            ``WatermarkStrategy``.
        :raises ValueError: for a strategy that generates watermarks without a timestamp
            assigner (source records carry no timestamps).
        """
        if not isinstance(source, Source):
            raise TypeError(f"from_source expects a Source, got {type(source).__name__}")
        if watermark_strategy is not None:
            if not isinstance(watermark_strategy, WatermarkStrategy):
                raise TypeError(f"from_source expects a WatermarkStrategy for source '{source_name}', "
                                f"got {watermark_strategy!r}")
            if not watermark_strategy.is_no_watermarks and watermark_strategy.get_timestamp_assigner() is None:
                raise ValueError(
                    f"The watermark strategy of source '{source_name}' has no timestamp assigner, and "
                    f"records of a Source carry no timestamps: add one with "
                    f"WatermarkStrategy.with_timestamp_assigner()"
                )
        operator = SourceOperator(source, watermark_strategy)
        t = SourceTransformation(self._new_id(), source_name, SimpleOperatorFactory(operator),
                                 source, -1, type_info)
        if watermark_strategy is not None:
            t.watermark_alignment = watermark_strategy.get_alignment_parameters()
        if source.non_parallel:
            t.set_parallelism(1)
            t.set_max_parallelism(1)
        self._add_operator(t)
        return DataStream(self, t)

    def add_source(self, source_func: Any, source_name: str = "Custom Source", type_info: Any = None) -> DataStream:
        """A stream from a legacy ``SourceFunction`` (run in its own thread, as Flink's legacy
        source task runs it) or a ``Source``.

        :raises TypeError: for anything else.
        """
        if isinstance(source_func, SourceFunction):
            source_func = SourceFunctionSource(source_func)
        return self.from_source(source_func, None, source_name, type_info)

    def create_input(self, input_format: InputFormat, type_info: Any = None) -> DataStream:
        """A stream read through an ``InputFormat`` (e.g. ``AvroInputFormat``), named
        ``"Custom Source"`` as Flink's ``createInput``."""
        return self.from_source(input_format, None, "Custom Source", type_info)

    def from_collection(self, collection: Sequence[Any], type_info: Any = None) -> DataStream:
        """The elements of ``collection`` in order, from a non-parallel source named
        ``"Collection Source"``. With a ``Types.ROW``/``ROW_NAMED`` type, tuple and list
        elements become ``Row``s with the type's field names, as PyFlink converts them."""
        if isinstance(type_info, RowTypeInfo):
            names, rows = type_info.get_field_names(), []
            for e in collection:
                if isinstance(e, (tuple, list)):
                    if len(e) != len(names):
                        raise ValueError(f"from_collection: element {e!r} has {len(e)} fields, the row "
                                         f"type {type_info!r} has {len(names)}")
                    e = Row(**dict(zip(names, e)))
                rows.append(e)
            collection = rows
        return self.from_source(CollectionSource(collection), None, "Collection Source", type_info)

    def from_sequence(self, start: int, end: int) -> DataStream:
        """The numbers ``start..end`` inclusive, split across the source's subtasks."""
        return self.from_source(NumberSequenceSource(start, end), None, "Sequence Source")

    def read_text_file(self, file_path: str, charset_name: str = "UTF-8") -> DataStream:
        """Lines of a text file (or of every file under a directory), split across subtasks.

        :raises FileNotFoundError: naming the path, if it does not exist.
        """
        source = FileSource([file_path], StreamFormat.text_line_format(charset_name))
        return self.from_source(source, None, "Custom File Source")

    # -- graphs ----------------------------------------------------------------------------
    def get_stream_graph(self, job_name: str = "Flink Streaming Job", clear_transformations: bool = False):
        """The StreamGraph of the program so far.

        :raises RuntimeError: if the program has no operators (Flink's "No operators defined
            in streaming topology. Cannot execute.").
        :raises ValueError: for invalid programs (forward between different parallelisms,
            max parallelism below parallelism, duplicate uid...), naming the operator.
        """
        if not self._transformations:
            raise RuntimeError("No operators defined in streaming topology. Cannot execute.")
        graph = StreamGraphGenerator(
            list(self._transformations), job_name=job_name, chaining_enabled=self._chaining,
            default_parallelism=self._parallelism, default_max_parallelism=self._max_parallelism,
            default_buffer_timeout_ms=self._buffer_timeout_ms,
            runtime_mode=effective_runtime_mode(self._config),
            batch_max_buffered_records=self._config.get(ExecutionOptions.SORTED_INPUTS_MAX_RECORDS),
        ).generate()
        if graph.runtime_mode is RuntimeExecutionMode.BATCH:
            self._disable_checkpointing_for_batch()
        if clear_transformations:
            self._transformations.clear()
        return graph

    def _disable_checkpointing_for_batch(self) -> None:
        """As Flink's ``configureStreamGraphBatch``: a BATCH job takes no checkpoints, so an
        enabled checkpoint interval is removed from the configuration (logged, not an error)."""
        key = CheckpointingOptions.CHECKPOINTING_INTERVAL.key
        if self._config.contains_key(key):
            self._config.remove_config(key)
            _LOG.info("Disabled Checkpointing. Checkpointing is not supported and not needed when "
                      "executing jobs in BATCH mode.")

    def get_execution_plan(self) -> str:
        """Flink's JSON execution plan of the StreamGraph (paste into the Flink plan
        visualizer)."""
        return self.get_stream_graph().get_streaming_plan_as_json()

    def get_transformations(self) -> List[Transformation]:
        return list(self._transformations)

    # -- execution -------------------------------------------------------------------------
    def _job_graph(self, job_name: str):
        stream_graph = self.get_stream_graph(job_name, clear_transformations=True)
        job_graph = stream_graph.get_job_graph()
        return stream_graph, job_graph

    def execute(self, job_name: Optional[str] = None) -> JobExecutionResult:
        """Run the job to its end and return its result (net runtime in ms, per-vertex
        summary).

        :raises JobExecutionException: if the job fails; its ``__cause__`` is the user
            function's original exception.
        """
        return self.execute_async(job_name).get_job_execution_result().result()

    def execute_async(self, job_name: Optional[str] = None, _collect_channel=None):
        """Submit the job and return a ``JobClient`` at once."""
        job_name = job_name or "Flink Streaming Job"
        # a bad checkpointing or restart setting fails here, before submission
        checkpointing = CheckpointingOptions.from_configuration(self._config)
        restart_backoff_time_strategy_from_configuration(self._config, checkpointing.enabled)
        validate_state_backend(self._config)
        if _context is not None and _context.intercepts_execution():
            transformations = list(self._transformations)
            stream_graph = self.get_stream_graph(job_name, clear_transformations=True)
            return _context.on_execute(self, stream_graph, _collect_channel, transformations)
        _, job_graph = self._job_graph(job_name)
        return submit_job(job_graph, self._config, self.get_global_job_parameters(), collect_channel=_collect_channel)

    def close(self) -> None:
        self._transformations.clear()
