"""The ExecutionGraph's failure handling (Flink's ``org.apache.flink.runtime.executiongraph``)."""
