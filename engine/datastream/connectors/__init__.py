"""Sources and sinks (PyFlink's ``pyflink.datastream.connectors``)."""

from rill.datastream.connectors.base import DeliveryGuarantee, Sink, SinkWriter
from rill.datastream.connectors.collect import CollectSink
from rill.datastream.connectors.collection import CollectionSource, NumberSequenceSource
from rill.datastream.connectors.file_system import (
    BucketAssigner,
    FileSink,
    FileSource,
    OutputFileConfig,
    RollingPolicy,
    StreamFormat,
)
from rill.common.connector.source import Boundedness, Source, SourceReader, SourceSplit, SplitEnumerator

__all__ = [
    "Boundedness",
    "BucketAssigner",
    "CollectSink",
    "CollectionSource",
    "DeliveryGuarantee",
    "FileSink",
    "FileSource",
    "NumberSequenceSource",
    "OutputFileConfig",
    "RollingPolicy",
    "Sink",
    "SinkWriter",
    "Source",
    "SourceReader",
    "SourceSplit",
    "SplitEnumerator",
    "StreamFormat",
]
