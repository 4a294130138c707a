"""The runtime execution mode of a DataStream program: ``RuntimeExecutionMode`` and the
``execution.runtime-mode`` option (Flink's ``org.apache.flink.api.common.RuntimeExecutionMode``
and ``ExecutionOptions.RUNTIME_MODE``; PyFlink's ``pyflink.datastream.RuntimeExecutionMode``).
"""

from __future__ import annotations

import enum
from typing import Any

from rill.common.configuration import ConfigOption, ConfigOptions, Configuration

__all__ = ["RuntimeExecutionMode", "ExecutionOptions", "runtime_mode_of", "configured_runtime_mode",
           "SPARK_TARGET", "SparkOptions", "runs_on_spark", "effective_runtime_mode"]

#: the ``execution.target`` that runs bounded programs on Spark (``rill.runtime.spark``)
SPARK_TARGET = "spark"


class RuntimeExecutionMode(enum.Enum):
    """How a DataStream program runs (PyFlink's enum, same members and values).

    - ``STREAMING``: every record is processed as it arrives; operators emit incremental
      results and watermarks drive event time (the default).
    - ``BATCH``: for bounded programs only; keyed inputs are processed key by key, operators
      emit final results only, event time jumps from the start to the end of time at the end
      of each key, no checkpoints (see ``rill.graph.batch_translation``).
    - ``AUTOMATIC``: ``BATCH`` when every source is bounded, else ``STREAMING``.
    """

    STREAMING = 0
    BATCH = 1
    AUTOMATIC = 2


class ExecutionOptions:
    """Options of how a job executes (Flink's ``ExecutionOptions``)."""

    RUNTIME_MODE = ConfigOption(
        "execution.runtime-mode", "STREAMING",
        "Runtime execution mode of DataStream programs: STREAMING, BATCH or AUTOMATIC "
        "(BATCH when every source is bounded).")
    SORTED_INPUTS_MAX_RECORDS = ConfigOption(
        "rill.batch.sorted-inputs.max-records", 1_000_000,
        "Records a keyed input of a BATCH job holds in memory per subtask before it spills them "
        "to local disk, partitioned by key group (Rill; Flink bounds its sorter with "
        "execution.sorted-inputs.memory).")


class SparkOptions:
    """Where and how ``execution.target: spark`` runs a job (Rill's; Flink has no Spark target).
    Defined here, with the target, so that their ``RILL_*`` variables are read with the rest."""

    MASTER = ConfigOption(
        "rill.spark.master", "",
        "Spark master of the session the Spark target starts when none is active (local[N], "
        "spark://host:port, yarn...); empty: local[N] with N the number of CPUs. An active "
        "SparkSession is used as it is.")
    RECORDS_PER_SHUFFLE_BATCH = ConfigOption(
        "rill.spark.records-per-batch", 1024,
        "Records one Spark record of an exchange carries at most (an edge's batch to one "
        "consumer subtask): Spark pays its per-record cost per batch.")


def runtime_mode_of(value: Any, what: str = ExecutionOptions.RUNTIME_MODE.key) -> RuntimeExecutionMode:
    """``value`` as a :class:`RuntimeExecutionMode`: the enum itself or its name in any case
    (``"batch"``, as Flink parses enum options).

    :param what: named in the error (the option key or the method).
    :raises ValueError: for any other value, naming it and the allowed names.
    """
    if isinstance(value, RuntimeExecutionMode):
        return value
    if isinstance(value, str):
        mode = RuntimeExecutionMode.__members__.get(value.strip().upper())
        if mode is not None:
            return mode
    raise ValueError(
        f"{what}: {value!r} is not a runtime execution mode; expected one of "
        f"{', '.join(RuntimeExecutionMode.__members__)}"
    )


def configured_runtime_mode(configuration: Configuration) -> RuntimeExecutionMode:
    """The mode ``execution.runtime-mode`` of ``configuration`` selects (``STREAMING`` unset).

    :raises ValueError: for a value that names no mode.
    """
    return runtime_mode_of(configuration.get(ExecutionOptions.RUNTIME_MODE))


def runs_on_spark(configuration: Configuration) -> bool:
    """Whether ``execution.target`` is ``spark``."""
    return str(configuration.get(ConfigOptions.EXECUTION_TARGET)).strip() == SPARK_TARGET


def effective_runtime_mode(configuration: Configuration) -> RuntimeExecutionMode:
    """The mode a program's StreamGraph is generated in: the configured one, except that
    ``execution.target: spark`` runs every program in ``BATCH`` (an unset mode, or
    ``AUTOMATIC``, becomes ``BATCH``; an unbounded source then fails as BATCH refuses it).

    :raises ValueError: for a mode that names no mode, or for ``STREAMING`` set explicitly
        with the Spark target.
    """
    mode = configured_runtime_mode(configuration)
    if not runs_on_spark(configuration):
        return mode
    if mode is RuntimeExecutionMode.STREAMING and configuration.contains_key(ExecutionOptions.RUNTIME_MODE.key):
        raise ValueError(f"execution.target '{SPARK_TARGET}' runs bounded programs in BATCH mode; "
                         f"'{ExecutionOptions.RUNTIME_MODE.key}' is set to STREAMING: set it to BATCH or AUTOMATIC")
    return RuntimeExecutionMode.BATCH
