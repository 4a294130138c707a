"""Spark types of Rill's declared types, through the Arrow columns the snapshot files use
(:mod:`rill.state.checkpoint.arrow_types`), so a DataFrame's column has exactly the type
``spark.read.parquet`` gives the same state."""

from __future__ import annotations

from typing import Any, List, Tuple

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import DataType, StructField, StructType

from rill.common.typeinfo import RowTypeInfo, TupleTypeInfo
from rill.state.checkpoint.arrow_types import ColumnCodec, column_codec

__all__ = ["spark_type", "spark_schema", "output_columns"]


def spark_type(arrow_type: pa.DataType) -> DataType:
    """The Spark type of an Arrow column type (naive timestamps: ``timestamp_ntz``)."""
    return from_arrow_type(arrow_type, prefer_timestamp_ntz=True)


def spark_schema(arrow_schema: pa.Schema) -> StructType:
    """The Spark schema of an Arrow schema, field by field."""
    return StructType([StructField(f.name, spark_type(f.type), f.nullable) for f in arrow_schema])


def output_columns(out_type_info: Any, where: str) -> Tuple[ColumnCodec, List[str], pa.Schema]:
    """How a reader's outputs of type ``out_type_info`` become columns: the codec of one
    output, the column names, and the Arrow schema of the batches. A ROW or TUPLE type gives
    one column per field (its names; ``f0, f1, ...`` for a tuple), any other type one column
    ``value``.

    :param where: the reader, for errors.
    :raises ValueError: if ``out_type_info`` is ``None`` (the output type is required, as
        Flink's ``outTypeInfo``) or has no column type.
    """
    if out_type_info is None:
        raise ValueError(f"{where}: the output type is required (out_type_info=Types....); Python "
                         f"cannot infer it from the function")
    codec = column_codec(out_type_info)
    if isinstance(out_type_info, (RowTypeInfo, TupleTypeInfo)):
        fields = list(codec.arrow_type)
        return codec, [f.name for f in fields], pa.schema(fields)
    return codec, ["value"], pa.schema([pa.field("value", codec.arrow_type)])
