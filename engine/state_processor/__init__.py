"""Reading and writing Rill checkpoints and savepoints with Spark: Flink's State Processor API
(``org.apache.flink.state.api``, Java-only in Flink) on PySpark, and PySpark data sources.

- :class:`SavepointReader` (Flink's ``SavepointReader``): ``read(spark, path)``, then
  ``read_keyed_state(uid, KeyedStateReaderFunction, out_type_info)``, ``read_list_state``,
  ``read_union_state``, ``read_broadcast_state`` and ``window(assigner)``; each gives a Spark
  DataFrame typed from the output type.
- :class:`SavepointWriter` (Flink's ``SavepointWriter``): ``new_savepoint(spark,
  max_parallelism)`` / ``from_existing_savepoint(spark, path)``, ``with_operator(uid,
  OperatorTransformation.bootstrap_with(df)...transform(function))``, ``remove_operator``,
  ``change_operator_identifier``, ``write(path)``: a savepoint a job restores from, written on
  the executors (:mod:`.operator_transformation`, :mod:`.bootstrap_tasks`).
- ``spark.read.format("rill-state")`` (:mod:`.state_data_source`) and
  ``format("rill-state-metadata")`` (:mod:`.metadata_data_source`), registered with
  :func:`register_data_sources`.

Reading runs on the Spark executors, one task per split of a subtask's files
(:mod:`.keyed_splits`); pyspark is the ``spark`` extra (``pip install 'rill[spark]'``).
"""

from __future__ import annotations

from typing import Any

from rill.state_processor.bootstrap_functions import (
    BroadcastStateBootstrapFunction,
    KeyedStateBootstrapFunction,
    StateBootstrapFunction,
)
from rill.state_processor.functions import KeyedStateReaderFunction, WindowReaderFunction
from rill.state_processor.metadata_data_source import RillStateMetadataDataSource
from rill.state_processor.operator_transformation import (
    BootstrapError,
    OperatorTransformation,
    StateBootstrapTransformation,
)
from rill.state_processor.savepoint_reader import SavepointReader
from rill.state_processor.savepoint_writer import SavepointWriter
from rill.state_processor.snapshots import OperatorIdentifier
from rill.state_processor.state_data_source import RillStateDataSource
from rill.state_processor.window_reader import WindowReader

__all__ = ["SavepointReader", "KeyedStateReaderFunction", "WindowReaderFunction", "WindowReader",
           "OperatorIdentifier", "RillStateDataSource", "RillStateMetadataDataSource",
           "register_data_sources", "SavepointWriter", "OperatorTransformation", "StateBootstrapTransformation",
           "KeyedStateBootstrapFunction", "StateBootstrapFunction", "BroadcastStateBootstrapFunction",
           "BootstrapError"]

#: Spark's switch for filter pushdown into Python data sources (off by default in Spark 4.1+).
FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register_data_sources(spark: Any) -> Any:
    """Register ``rill-state`` and ``rill-state-metadata`` with ``spark`` (a SparkSession) and
    turn on filter pushdown into Python data sources (``rill-state`` prunes key groups with
    it); returns ``spark``. Idempotent."""
    spark.dataSource.register(RillStateDataSource)
    spark.dataSource.register(RillStateMetadataDataSource)
    spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
    return spark
