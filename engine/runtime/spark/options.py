"""Options of the Spark execution target (``execution.target: spark``)."""

from __future__ import annotations

from rill.common.configuration import ConfigOption

__all__ = ["SparkOptions"]


class SparkOptions:
    """Where and how ``execution.target: spark`` runs a job (Rill's; Flink has no Spark target)."""

    MASTER = ConfigOption(
        "rill.spark.master", "",
        "Spark master of the session the Spark target starts when none is active (local[N], "
        "spark://host:port, yarn...); empty: local[N] with N the number of CPUs. An active "
        "SparkSession is used as it is.")
    RECORDS_PER_SHUFFLE_BATCH = ConfigOption(
        "rill.spark.records-per-batch", 1024,
        "Records one Spark record of an exchange carries at most (an edge's batch to one "
        "consumer subtask): Spark pays its per-record cost per batch.")
