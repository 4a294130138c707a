"""Field names of Flink's REST responses (Flink 1.18 REST API reference, the response
classes' ``@JsonProperty`` names) that Rill's responses must carry."""

OVERVIEW = {"taskmanagers", "slots-total", "slots-available", "jobs-running", "jobs-finished",
            "jobs-cancelled", "jobs-failed", "flink-version", "flink-commit"}
CONFIG = {"refresh-interval", "timezone-name", "timezone-offset", "flink-version", "flink-revision", "features"}
JOB_ID_WITH_STATUS = {"id", "status"}
JOB_OVERVIEW = {"jid", "name", "state", "start-time", "end-time", "duration", "last-modification", "tasks"}
JOB_OVERVIEW_TASKS = {"total", "created", "scheduled", "deploying", "running", "finished", "canceling",
                      "canceled", "failed", "reconciling", "initializing"}
JOB_DETAILS = {"jid", "name", "isStoppable", "state", "start-time", "end-time", "duration", "maxParallelism",
               "now", "timestamps", "vertices", "status-counts", "plan"}
JOB_DETAILS_VERTEX = {"id", "name", "maxParallelism", "parallelism", "status", "start-time", "end-time",
                      "duration", "tasks", "metrics"}
IO_METRICS = {"read-bytes", "read-bytes-complete", "write-bytes", "write-bytes-complete", "read-records",
              "read-records-complete", "write-records", "write-records-complete",
              "accumulated-backpressured-time", "accumulated-idle-time", "accumulated-busy-time"}
PLAN = {"jid", "name", "type", "nodes"}
PLAN_NODE = {"id", "parallelism", "operator", "operator_strategy", "description", "optimizer_properties"}
PLAN_INPUT = {"num", "id", "ship_strategy", "exchange"}
VERTEX_DETAILS = {"id", "name", "parallelism", "maxParallelism", "now", "subtasks"}
SUBTASK_ATTEMPT = {"subtask", "status", "attempt", "endpoint", "start-time", "end-time", "duration", "metrics",
                   "taskmanager-id", "status-duration"}
BACKPRESSURE = {"status", "backpressure-level", "end-timestamp", "subtasks"}
SUBTASK_BACKPRESSURE = {"subtask", "attempt-number", "backpressure-level", "ratio", "idleRatio", "busyRatio"}
WATERMARK = {"id", "value"}
EXCEPTIONS = {"root-exception", "timestamp", "all-exceptions", "truncated", "exceptionHistory"}
EXCEPTION_ENTRY = {"exceptionName", "stacktrace", "timestamp", "taskName", "endpoint", "taskManagerId",
                   "failureLabels", "concurrentExceptions"}
TASKMANAGER = {"id", "path", "dataPort", "jmxPort", "timeSinceLastHeartbeat", "slotsNumber", "freeSlots",
               "totalResource", "freeResource", "hardware"}
ERROR = {"errors"}
BACKPRESSURE_LEVELS = {"ok", "low", "high"}
CHECKPOINTING_STATISTICS = {"counts", "summary", "latest", "history"}
CHECKPOINT_COUNTS = {"restored", "total", "in_progress", "completed", "failed"}
CHECKPOINT_SUMMARY = {"checkpointed_size", "state_size", "end_to_end_duration", "alignment_buffered",
                      "processed_data", "persisted_data"}
STATS_SUMMARY = {"min", "max", "avg", "p50", "p90", "p95", "p99", "p999"}
LATEST_CHECKPOINTS = {"completed", "savepoint", "failed", "restored"}
CHECKPOINT_STATISTICS = {"className", "id", "status", "is_savepoint", "savepointFormat", "trigger_timestamp",
                         "latest_ack_timestamp", "checkpointed_size", "state_size", "end_to_end_duration",
                         "alignment_buffered", "processed_data", "persisted_data", "num_subtasks",
                         "num_acknowledged_subtasks", "checkpoint_type", "tasks"}
COMPLETED_CHECKPOINT_STATISTICS = CHECKPOINT_STATISTICS | {"external_path", "discarded"}
FAILED_CHECKPOINT_STATISTICS = CHECKPOINT_STATISTICS | {"failure_timestamp", "failure_message"}
