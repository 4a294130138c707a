"""Bootstrap transformations: how a DataFrame becomes one operator's state in a savepoint
(Flink's ``OperatorTransformation``, ``OneInputOperatorTransformation``,
``KeyedOperatorTransformation`` and ``StateBootstrapTransformation``)::

    transformation = (OperatorTransformation.bootstrap_with(df)       # a Spark DataFrame
                      .key_by("carrier")                              # a column, or a function of the row
                      .transform(CarrierStatsBootstrap()))            # a KeyedStateBootstrapFunction
    SavepointWriter.new_savepoint(spark, 128).with_operator("carrier-stats", transformation).write(path)

Without ``key_by``, ``transform`` takes a ``StateBootstrapFunction`` (operator list / union
state, one subtask per partition of the DataFrame) or a ``BroadcastStateBootstrapFunction``
(broadcast state, one subtask, as Flink's).

The write runs on the Spark executors (:meth:`StateBootstrapTransformation.write_operator_state`):
a keyed bootstrap computes each row's key and its key group with Rill's
``KeyGroupRangeAssignment`` (:func:`~rill.state.key_groups.assign_to_key_group`), shuffles the
rows to one Spark partition per subtask (its key-group range) and each partition writes its
subtask's files (:mod:`rill.state_processor.bootstrap_tasks`). The operator's parallelism is the
DataFrame's number of partitions (Flink: the input's parallelism), at most its max parallelism
(Flink's ``StateBootstrapTransformation`` caps it so); repartition the DataFrame to choose it.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Union

from rill.common.functions import KeySelector
from rill.state.checkpoint.filesystem import FileOperatorSubtaskStateHandle
from rill.state.checkpoint.metadata import OperatorState
from rill.state.key_groups import (
    UPPER_BOUND_MAX_PARALLELISM,
    assign_to_key_group,
    compute_operator_index_for_key_group,
)
from rill.state_processor.bootstrap_functions import (
    BroadcastStateBootstrapFunction,
    KeyedStateBootstrapFunction,
    StateBootstrapFunction,
)
from rill.state_processor.bootstrap_tasks import (
    BootstrapError,
    BootstrapTask,
    SubtaskResult,
    write_broadcast_subtask,
    write_keyed_subtask,
    write_operator_state_subtask,
)

__all__ = ["OperatorTransformation", "OneInputOperatorTransformation", "KeyedOperatorTransformation",
           "StateBootstrapTransformation", "BootstrapError", "check_max_parallelism"]


def check_max_parallelism(max_parallelism: Any, where: str) -> int:
    """``max_parallelism`` if it is an int in ``[1, 32768]``.

    :raises ValueError: otherwise, naming ``where``.
    """
    if type(max_parallelism) is not int or not 1 <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ValueError(f"{where}: max parallelism must be an int in [1, {UPPER_BOUND_MAX_PARALLELISM}], "
                         f"got {max_parallelism!r}")
    return max_parallelism


class _ColumnKey:
    """The key of a row is one of its columns (``key_by("carrier")``)."""

    __slots__ = ("column",)

    def __init__(self, column: str) -> None:
        self.column = column

    def __call__(self, row: Any) -> Any:
        return row[self.column]

    def __repr__(self) -> str:
        return f"column {self.column!r}"


class OperatorTransformation:
    """Where a bootstrap starts (Flink's ``OperatorTransformation``)."""

    @staticmethod
    def bootstrap_with(dataframe: Any) -> "OneInputOperatorTransformation":
        """Bootstrap state from the rows of ``dataframe`` (a Spark DataFrame; Flink takes a
        DataStream).

        :raises TypeError: if ``dataframe`` is not a Spark DataFrame.
        """
        if not (hasattr(dataframe, "rdd") and hasattr(dataframe, "columns")):
            raise TypeError(f"OperatorTransformation.bootstrap_with expects a Spark DataFrame, got {dataframe!r}")
        return OneInputOperatorTransformation(dataframe)


class OneInputOperatorTransformation:
    """A DataFrame to bootstrap from, not yet keyed (Flink's ``OneInputOperatorTransformation``)."""

    def __init__(self, dataframe: Any) -> None:
        self.dataframe = dataframe
        self.max_parallelism: Optional[int] = None

    def set_max_parallelism(self, max_parallelism: int) -> "OneInputOperatorTransformation":
        """The operator's max parallelism (number of key groups), instead of the savepoint's
        (Flink's ``setMaxParallelism``).

        :raises ValueError: if it is not an int in ``[1, 32768]``.
        """
        self.max_parallelism = check_max_parallelism(max_parallelism, "set_max_parallelism")
        return self

    def key_by(self, key: Union[str, Callable[[Any], Any], KeySelector], key_type: Any = None) -> "KeyedOperatorTransformation":
        """Key the rows by a column (its name) or a function of the row (a callable or a
        ``KeySelector``) (Flink's ``keyBy(KeySelector[, TypeInformation])`` /
        ``keyBy(String...)``). The keys must be the job's keys: the same values, hence the same
        key groups.

        :param key_type: the key's declared type (``Types...``): the savepoint's ``key`` column is
            typed by it; ``None`` writes keys untyped, as a job keyed by a function does.
        :raises KeyError: for a column the DataFrame does not have.
        :raises TypeError: for anything else than a column name, a callable or a ``KeySelector``.
        """
        if isinstance(key, str):
            if key not in self.dataframe.columns:
                raise KeyError(f"key_by({key!r}): the DataFrame has no column {key!r} "
                               f"(its columns: {self.dataframe.columns})")
            selector: Callable[[Any], Any] = _ColumnKey(key)
        elif isinstance(key, KeySelector):
            selector = key.get_key
        elif callable(key):
            selector = key
        else:
            raise TypeError(f"key_by expects a column name, a function of the row or a KeySelector, got {key!r}")
        return KeyedOperatorTransformation(self, selector, key_type)

    def transform(self, function: Union[StateBootstrapFunction, BroadcastStateBootstrapFunction]
                  ) -> "StateBootstrapTransformation":
        """Bootstrap operator state with a ``StateBootstrapFunction`` (list / union state, one
        subtask per partition of the DataFrame) or broadcast state with a
        ``BroadcastStateBootstrapFunction`` (one subtask) (Flink's ``transform``).

        :raises TypeError: for another function (a ``KeyedStateBootstrapFunction`` needs
            ``key_by`` first).
        """
        if isinstance(function, StateBootstrapFunction):
            return StateBootstrapTransformation(self, function, "operator")
        if isinstance(function, BroadcastStateBootstrapFunction):
            return StateBootstrapTransformation(self, function, "broadcast")
        if isinstance(function, KeyedStateBootstrapFunction):
            raise TypeError(f"transform({type(function).__name__}): a KeyedStateBootstrapFunction needs "
                            f"a keyed bootstrap: bootstrap_with(df).key_by(...).transform(...)")
        raise TypeError(f"transform expects a StateBootstrapFunction or a BroadcastStateBootstrapFunction, "
                        f"got {function!r}")


class KeyedOperatorTransformation:
    """A keyed DataFrame to bootstrap from (Flink's ``KeyedOperatorTransformation``)."""

    def __init__(self, source: OneInputOperatorTransformation, key_selector: Callable[[Any], Any],
                 key_type: Any) -> None:
        self.source = source
        self.key_selector = key_selector
        self.key_type = key_type

    def transform(self, function: KeyedStateBootstrapFunction) -> "StateBootstrapTransformation":
        """Bootstrap keyed state (and timers) with ``function`` (Flink's ``transform``).

        :raises TypeError: if it is not a ``KeyedStateBootstrapFunction``.
        """
        if not isinstance(function, KeyedStateBootstrapFunction):
            raise TypeError(f"A keyed bootstrap's transform expects a KeyedStateBootstrapFunction, got {function!r}")
        return StateBootstrapTransformation(self.source, function, "keyed", self.key_selector, self.key_type)

    def window(self, assigner: Any) -> Any:
        """Flink's ``window(WindowAssigner)`` (bootstrapping a window operator's state): not built.

        :raises NotImplementedError: always."""
        raise NotImplementedError("KeyedOperatorTransformation.window: bootstrapping window state is not built "
                                  "in Rill's SavepointWriter; bootstrap keyed state with a KeyedStateBootstrapFunction")


class StateBootstrapTransformation:
    """One operator's bootstrapped state, written by :class:`~rill.state_processor.SavepointWriter`
    (Flink's ``StateBootstrapTransformation``).

    :ivar kind: ``"keyed"``, ``"operator"`` or ``"broadcast"``.
    """

    def __init__(self, source: OneInputOperatorTransformation, function: Any, kind: str,
                 key_selector: Optional[Callable[[Any], Any]] = None, key_type: Any = None) -> None:
        self.dataframe = source.dataframe
        self.own_max_parallelism = source.max_parallelism
        self.function = function
        self.kind = kind
        self.key_selector = key_selector
        self.key_type = key_type

    def get_max_parallelism(self, global_max_parallelism: int) -> int:
        """The operator's max parallelism: its own if set, else the savepoint's (Flink's
        ``getMaxParallelism``)."""
        return self.own_max_parallelism or global_max_parallelism

    def write_operator_state(self, spark: Any, directory: str, operator_id: str, uid: Optional[str],
                             global_max_parallelism: int, checkpoint_id: int, timestamp: int) -> OperatorState:
        """Write the operator's files into the savepoint directory ``directory`` on the
        executors (one Spark job) and return its metadata entry (Flink's
        ``writeOperatorState``).

        :raises BootstrapError: if the key selector, the function or the writer failed on an
            executor.
        """
        max_parallelism = self.get_max_parallelism(global_max_parallelism)
        who = f"uid {uid!r}" if uid is not None else f"operator id {operator_id}"
        rdd = self.dataframe.rdd
        # an empty DataFrame may have no partition: the operator still has one (empty) subtask;
        # more partitions than key groups are merged, as Flink caps the parallelism at the max
        partitions = max(1, rdd.getNumPartitions())
        parallelism = 1 if self.kind == "broadcast" else min(partitions, max_parallelism)
        if self.kind == "operator" and partitions > parallelism:
            rdd = rdd.coalesce(parallelism)
        task = BootstrapTask(directory, operator_id, uid, parallelism, max_parallelism, self.function,
                             checkpoint_id, timestamp, self.key_type)
        if self.kind == "keyed":
            job = _keyed_job(rdd, task, self.key_selector, who)  # type: ignore[arg-type]
        elif self.kind == "operator":
            job = rdd.mapPartitionsWithIndex(lambda i, rows: [write_operator_state_subtask(task, i, rows)])
        else:
            job = rdd.coalesce(1).mapPartitions(lambda rows: [write_broadcast_subtask(task, rows)])
        results = collect(job, f"with_operator({who})")
        return operator_state_of(operator_id, uid, parallelism, max_parallelism, directory, results,
                                 type(self.function).__name__)


def _keyed_job(rdd: Any, task: BootstrapTask, selector: Callable[[Any], Any], who: str) -> Any:
    """The Spark job of a keyed bootstrap: rows keyed on the executors, shuffled to the
    partition of their subtask (key group -> subtask as a job assigns them), one write per
    partition."""
    max_parallelism, parallelism = task.max_parallelism, task.parallelism

    def keyed(rows: Any) -> Any:
        for row in rows:
            try:
                key = selector(row)
                key_group = assign_to_key_group(key, max_parallelism)
            except Exception as e:
                raise BootstrapError(f"with_operator({who}): the key selector ({selector!r}) failed on the row "
                                     f"{row!r}: {type(e).__name__}: {e}") from e
            yield compute_operator_index_for_key_group(max_parallelism, parallelism, key_group), (key, row)

    shuffled = rdd.mapPartitions(keyed).partitionBy(parallelism, lambda subtask: subtask)
    return shuffled.mapPartitionsWithIndex(
        lambda index, pairs: [write_keyed_subtask(task, index, (pair for _, pair in pairs))])


def collect(job: Any, where: str) -> List[SubtaskResult]:
    """Run ``job`` (an RDD of subtask results) and collect them, by subtask.

    :raises BootstrapError: if a Spark task failed; the message is the task's own error line
        (the Python exception Spark reports), prefixed with ``where``.
    """
    try:
        return sorted(job.collect())
    except Exception as e:
        raise BootstrapError(f"{where}: writing the state on Spark failed: {_python_error(e)}") from e


def _python_error(error: BaseException) -> str:
    """The last line of the executor's Python traceback that Spark's exception carries (the
    exception's type and message), or the exception itself."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    for line in reversed(lines):
        head, _, message = line.partition(":")
        if head.endswith(("Error", "Exception")) and not head.startswith(("org.", "java.", "py4j")):
            return f"{head.rsplit('.', 1)[-1]}:{message}"  # the class without its module path
    return f"{type(error).__name__}: {lines[-1] if lines else error!r}"


def operator_state_of(operator_id: str, uid: Optional[str], parallelism: int, max_parallelism: int,
                      directory: str, results: List[SubtaskResult], name: str,
                      coordinator_state: Optional[bytes] = None) -> OperatorState:
    """The metadata entry of an operator written as ``results`` into ``directory``."""
    handles = {index: FileOperatorSubtaskStateHandle(directory, description) for index, description in results}
    return OperatorState(operator_id, parallelism, max_parallelism, handles, uid, name, coordinator_state)
