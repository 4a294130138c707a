"""``execution.target: spark``: bounded programs run on the Spark cluster a SparkSession points
at, each Spark task running the chained operators of one subtask with Rill's own operator code
in BATCH semantics (see :mod:`rill.runtime.spark.translation`).

Only :mod:`rill.runtime.spark.runner` imports pyspark (the ``spark`` extra); importing this
package does not.
"""

from rill.common.execution_options import SparkOptions
from rill.runtime.spark.support import UnsupportedOnSparkError, check_runs_on_spark

__all__ = ["SparkOptions", "UnsupportedOnSparkError", "check_runs_on_spark"]
