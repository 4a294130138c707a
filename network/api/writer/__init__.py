"""Writing records to partitions (Flink's ``org.apache.flink.runtime.io.network.api.writer``)."""

from .record_writer import DEFAULT_RECORDS_PER_BUFFER, RecordWriter

__all__ = ["RecordWriter", "DEFAULT_RECORDS_PER_BUFFER"]
