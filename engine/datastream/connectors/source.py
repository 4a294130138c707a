"""The Source API (FLIP-27), where Rill's DataStream API has always exported it.

Defined in :mod:`rill.common.connector.source` (Flink keeps it in flink-core,
``org.apache.flink.api.connector.source``, below the runtime that enumerates splits) and
re-exported here for programs and connectors that import it from the API.
"""

from rill.common.connector.source import (
    Boundedness,
    Source,
    SourceReader,
    SourceSplit,
    SplitEnumerator,
)

__all__ = ["Boundedness", "SourceSplit", "SplitEnumerator", "SourceReader", "Source"]
