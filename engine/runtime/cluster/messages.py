"""Messages of the cluster's control plane (Flink's RPC gateways, as Thespian messages).

Every message is a small picklable dataclass. Anything that carries user code (job graphs,
task deployment descriptors, source splits, task failures) travels as ``bytes`` pickled with
cloudpickle by the sender, so Thespian's own pickling never touches user objects and a
deserialization error is raised, with context, by the receiver's code.

Flow of a job (names as in Flink)::

    client --SubmitJob--> Dispatcher --(creates)--> JobMaster --RequestSlots--> ResourceManager
    ResourceManager --SlotsAllocated--> JobMaster --StartTask--> TaskExecutor --(creates)--> StreamTask
    StreamTask --TaskProcessReady(data address)--> JobMaster --DeployTask(TDD + locations)--> StreamTask
    StreamTask --TaskExecutionStateUpdate / TaskMetricsReport / RequestSplit / ReportedWatermarkEvent--> JobMaster
    JobMaster --TriggerCheckpoint / NotifyCheckpointComplete / NotifyCheckpointAborted--> StreamTask
    StreamTask --AcknowledgeCheckpoint / DeclineCheckpoint--> JobMaster
    JobMaster --JobStatusReport--> Dispatcher <--RequestJobStatus-- client
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Optional, Tuple


def _short_repr(self) -> str:
    """Thespian formats every message it sends (``TransmitIntent.identify``): keep the big ones
    cheap -- their class and first field only."""
    first = fields(self)[0].name
    value = getattr(self, first)
    shown = f"<{len(value)} bytes>" if isinstance(value, (bytes, bytearray)) else repr(value)[:40]
    return f"{type(self).__name__}({first}={shown}, ...)"

# ---------------------------------------------------------------- client ↔ Dispatcher


@dataclass(frozen=True, repr=False)
class SubmitJob:
    """:ivar job_graph: the JobGraph pickled with cloudpickle. :ivar configuration: the
    program's merged Configuration. :ivar collect_endpoints: ``channel id → (host, port)`` of
    the client's collect servers. :ivar working_directory: the client's working directory,
    against which the job's relative paths resolve on the cluster (see ``shipping``)."""

    job_id: str
    job_name: str
    job_graph: bytes
    configuration: Any
    job_parameters: Dict[str, str]
    collect_endpoints: Dict[str, Tuple[str, int]] = field(default_factory=dict)
    collect_secret: Optional[bytes] = None
    working_directory: Optional[str] = None

    __repr__ = _short_repr


@dataclass(frozen=True)
class JobSubmitted:
    job_id: str
    job_name: str


@dataclass(frozen=True)
class JobSubmissionFailed:
    """The job could not be accepted; ``message`` says why."""

    message: str


@dataclass(frozen=True)
class RequestJobStatus:
    job_id: str


@dataclass(frozen=True)
class CancelJob:
    job_id: str


@dataclass(frozen=True)
class CancelAck:
    """:ivar known: whether the Dispatcher knows the job. :ivar status: its ``JobStatus`` name
    when the cancellation arrived (a terminal one means there was nothing to cancel)."""

    job_id: str
    known: bool
    status: Optional[str] = None


@dataclass(frozen=True)
class RequestClusterOverview:
    pass


@dataclass(frozen=True, repr=False)
class ClusterOverview:
    """:ivar task_executors: one ``(resource id, slots, free slots, pid, host)`` per
    registered TaskExecutor. :ivar jobs: ``(job id, name, status, submitted, ended)`` of every
    known job, the times in seconds since the epoch (``ended`` None while it runs)."""

    task_executors: List[Tuple[str, int, int, int, str]]
    jobs: List[Tuple[str, str, str, float, Optional[float]]]

    __repr__ = _short_repr


@dataclass(frozen=True)
class UnknownJob:
    """The Dispatcher does not know ``job_id``.

    :ivar reason: why, when the Dispatcher can tell (it was restarted after its process
        exited, and the jobs it ran were lost with it).
    :ivar final: ``False`` while a restarted Dispatcher may still receive the job's final
        report from its orphaned JobMaster: the client keeps asking.
    """

    job_id: str
    reason: Optional[str] = None
    final: bool = True


@dataclass(repr=False)
class JobStatusReport:
    """What the JobMaster tells the Dispatcher (and the Dispatcher the client) about a job.

    :ivar status: a ``JobStatus`` name. :ivar execution_states: ``"Name (i/p)"`` → an
        ``ExecutionState`` name. :ivar metrics: the latest ``TaskMetricsSnapshot`` of every
        task. :ivar result: at the end, the pickled ``JobExecutionResult`` or exception.
    :ivar failure_cause: at the end of a failed job, its exception as text (the Dispatcher
        logs it without loading user code).
    :ivar network_memory: ``"Name (i/p)"`` → ``(available, total)`` memory segments of the
        NetworkBufferPool of that task's process as it last reported them (Flink's
        ``Status.Shuffle.Netty.AvailableMemorySegments`` / ``TotalMemorySegments``, which are
        per TaskManager: a cluster task has a process of its own); once the task is terminal,
        as read right before it reported that state.
    """

    job_id: str
    job_name: str
    status: str
    execution_states: Dict[str, str]
    metrics: List[Any]
    vertex_summaries: List[Any]
    source_progress: Tuple[int, Optional[int]]
    source_units_are_bytes: bool
    net_runtime_ms: Optional[int]
    result: Optional[bytes] = None
    #: the job as the REST API shows it (``rill.runtime.rest.snapshot.JobSnapshot``)
    rest_snapshot: Any = None
    job_master_pid: Optional[int] = None
    failure_cause: Optional[str] = None
    #: the job's ``CheckpointStatsSnapshot`` (``None`` without checkpointing)
    checkpoint_stats: Any = None
    network_memory: Dict[str, Tuple[int, int]] = field(default_factory=dict)

    __repr__ = _short_repr


# ---------------------------------------------------------------- Dispatcher ↔ JobMaster


@dataclass(frozen=True, repr=False)
class StartJobMaster:
    job_id: str
    submission: SubmitJob
    dispatcher: Any
    resource_manager: Any
    secret: bytes
    supervisor: Any = None
    heartbeat_interval_ms: int = 1000

    __repr__ = _short_repr


@dataclass(frozen=True)
class JobMasterTerminated:
    job_id: str


# ---------------------------------------------------------------- JobMaster ↔ ResourceManager


@dataclass(frozen=True)
class RequestSlots:
    job_id: str
    num_slots: int


@dataclass(frozen=True)
class AllocatedSlot:
    """One slot: the TaskExecutor actor's address, its resource id, slot number and host."""

    task_executor: Any
    resource_id: str
    slot_number: int
    host: str


@dataclass(frozen=True, repr=False)
class SlotsAllocated:
    job_id: str
    slots: List[AllocatedSlot]

    __repr__ = _short_repr


@dataclass(frozen=True)
class SlotRequestFailed:
    job_id: str
    message: str


@dataclass(frozen=True)
class FreeSlots:
    job_id: str


@dataclass(frozen=True)
class TaskExecutorLost:
    """A TaskExecutor that held slots of the job is gone (process exited or heartbeat timed out)."""

    resource_id: str
    cause: str


# ---------------------------------------------------------------- TaskExecutor ↔ ResourceManager


@dataclass(frozen=True)
class InitResourceManager:
    """``rill cluster start`` → ResourceManager: heartbeat settings (ms, Flink's
    ``heartbeat.interval``/``heartbeat.timeout``)."""

    heartbeat_interval_ms: int
    heartbeat_timeout_ms: int


@dataclass(frozen=True)
class InitDispatcher:
    """Supervisor → Dispatcher.

    :ivar supervisor: the cluster's supervisor (orphaned JobMasters send it their reports).
    :ivar heartbeat_interval_ms: how often JobMasters send ``JobMasterHeartbeat``.
    :ivar previous_exit: set on a restarted Dispatcher: what happened to the previous one.
    :ivar recovery_ms: how long a restarted Dispatcher answers unknown jobs with a non-final
        ``UnknownJob`` (their orphaned JobMasters' reports may still arrive).
    """

    resource_manager: Any
    secret: bytes
    supervisor: Any = None
    heartbeat_interval_ms: int = 1000
    previous_exit: Optional[str] = None
    recovery_ms: int = 0


@dataclass(frozen=True)
class StartTaskExecutors:
    """Sent by ``rill cluster start`` to the ResourceManager: create ``count`` TaskExecutors
    with ``slots`` each in this actor system."""

    count: int
    slots: int
    host: str


@dataclass(frozen=True)
class InitTaskExecutor:
    resource_id: str
    slots: int
    host: str
    resource_manager: Any
    heartbeat_interval_ms: int
    heartbeat_timeout_ms: int = 50000


@dataclass(frozen=True)
class RegisterTaskExecutor:
    resource_id: str
    slots: int
    host: str
    pid: int


@dataclass(frozen=True)
class Heartbeat:
    resource_id: str


@dataclass(frozen=True)
class HeartbeatAck:
    """ResourceManager → TaskExecutor, for each ``Heartbeat`` of a registered TaskExecutor: one
    that hears none for ``heartbeat.timeout`` ms has lost its ResourceManager (or was declared
    lost by it) and exits."""


@dataclass(frozen=True)
class Ack:
    pass


# ---------------------------------------------------------------- supervision and liveness


@dataclass(frozen=True)
class InitSupervisor:
    """``rill cluster start`` → ClusterSupervisor: create the ResourceManager (with
    ``task_executors`` TaskExecutors of ``slots`` slots, kept at that number) and the Dispatcher.
    Heartbeat settings in ms (Flink's ``heartbeat.interval``/``heartbeat.timeout``)."""

    secret: bytes
    heartbeat_interval_ms: int
    heartbeat_timeout_ms: int
    task_executors: int
    slots: int
    host: str


@dataclass(frozen=True)
class ControlActorStarted:
    """Dispatcher / ResourceManager → supervisor once initialized: its role and pid."""

    role: str
    pid: int


@dataclass(frozen=True)
class RequestLeaders:
    """Client → supervisor: the current Dispatcher and ResourceManager."""


@dataclass(frozen=True)
class Leaders:
    dispatcher: Any
    resource_manager: Any


@dataclass(frozen=True)
class ResourceManagerLost:
    """Supervisor → Dispatcher → every JobMaster: the ResourceManager's process exited (its
    TaskExecutors and their tasks exit with it); ``resource_manager`` is its replacement."""

    cause: str
    resource_manager: Any


@dataclass(frozen=True)
class JobMasterLost:
    """Dispatcher → ResourceManager: a JobMaster's process exited; free the job's slots and
    have its TaskExecutors stop its tasks."""

    job_id: str
    cause: str


@dataclass(frozen=True)
class CancelJobTasks:
    """ResourceManager → TaskExecutor: stop every task of ``job_id`` (its JobMaster is gone)."""

    job_id: str
    cause: str


@dataclass(frozen=True)
class JobMasterHeartbeat:
    """JobMaster → each TaskExecutor running its tasks, every ``heartbeat.interval`` ms (Flink's
    JobMaster↔TaskExecutor heartbeat request): without one for ``heartbeat.timeout`` ms the
    TaskExecutor stops the job's tasks and frees their slots."""

    job_id: str


@dataclass(frozen=True)
class JobMasterHeartbeatAck:
    """TaskExecutor → JobMaster, for each ``JobMasterHeartbeat`` (Flink's heartbeat response).
    The JobMaster sends a TaskExecutor its next heartbeat only once the last one is answered: a
    process that hangs (SIGSTOP) takes messages into its socket but never acknowledges them, and
    Thespian lets an actor have only 20 unacknowledged transmits (``MAX_PENDING_TRANSMITS``)
    before it queues everything it sends, to every peer, for up to 5 minutes."""

    job_id: str
    resource_id: str


# ---------------------------------------------------------------- JobMaster ↔ TaskExecutor ↔ StreamTask


@dataclass(frozen=True)
class StartTask:
    """JobMaster → TaskExecutor: start the process of one task attempt in slot ``slot_number``."""

    job_id: str
    attempt_id: str
    task_name: str
    slot_number: int
    job_master: Any
    netty_config: Any


@dataclass(frozen=True)
class ReleaseJobTasks:
    """ResourceManager → TaskExecutor, when the job's slots are freed: stop every task process
    of ``job_id`` still running there, and start none for it any more. A job cancelled while its
    processes were starting ends before they report ready; its JobMaster then exits, and what it
    last sent may never arrive (a TaskExecutor busy starting processes accepts late): the
    ResourceManager outlives jobs, so its message does arrive."""

    job_id: str


@dataclass(frozen=True)
class PoolTaskProcess:
    """TaskExecutor → a StreamTask actor it started ahead of any deployment: wait in the pool
    (answered with ``TaskProcessPooled`` carrying the same ``token``; the address ``createActor``
    returned is not the one the process answers from)."""

    token: int


@dataclass(frozen=True)
class TaskProcessPooled:
    """StreamTask → its TaskExecutor: ready in the pool (process ``pid``)."""

    token: int
    pid: int


@dataclass(frozen=True)
class StartTaskProcess:
    """TaskExecutor → its new StreamTask actor (``resource_id`` and ``host`` of the TaskExecutor)."""

    job_id: str
    attempt_id: str
    task_name: str
    job_master: Any
    netty_config: Any
    resource_id: str
    host: str = "?"


@dataclass(frozen=True)
class TaskProcessReady:
    """StreamTask → JobMaster and its TaskExecutor: the process runs attempt ``attempt_id``
    (task ``task_name``) and serves its partitions at ``data_address``. The TaskExecutor files a
    reused process (``ReuseTaskProcess``) under its new attempt."""

    attempt_id: str
    data_address: Tuple[str, int]
    pid: int
    task_name: str = "?"


@dataclass(frozen=True)
class ReuseTaskProcess:
    """JobMaster → the StreamTask process of one of its job's terminal tasks, at a restart: drop
    the old task (its thread ended, its partitions released) and run attempt ``attempt_id`` of
    ``task_name`` next, keeping the process and its data plane (address, secret, settings: the
    job's, unchanged). Answered with ``TaskProcessReady`` as a new process is. A process only
    ever serves one job: it is reused across the attempts of that job, never for another.
    (Flink keeps its TaskManagers across attempts; Rill's task processes are the stand-in.)"""

    old_attempt_id: str
    attempt_id: str
    task_name: str


@dataclass(frozen=True)
class TaskProcessFailed:
    attempt_id: str
    message: str


@dataclass(frozen=True, repr=False)
class DeployTask:
    """JobMaster → StreamTask: the task's deployment in three cloudpickled parts (Flink's
    ``TaskDeploymentDescriptor`` with serialized job and task information) and the job's
    collect endpoints.

    :ivar tdd: the per-subtask part (``deployment.subtask_descriptor``: subtask index, attempt,
        partitions, gates with the location of every consumed partition), pickled per subtask.
    :ivar task_information: the vertex's ``TaskInformation`` (its operators and edges only),
        pickled once per vertex and shared by its subtasks' messages.
    :ivar job_information: the ``JobInformation`` (job id, name, configuration, parameters),
        pickled once per job.
    """

    tdd: bytes
    task_information: bytes
    job_information: bytes
    collect_endpoints: Dict[str, Tuple[str, int]]
    collect_secret: Optional[bytes]

    __repr__ = _short_repr


@dataclass(frozen=True, repr=False)
class TaskExecutionStateUpdate:
    """StreamTask → JobMaster. ``failure`` is a pickled ``TaskFailure`` when the task failed;
    ``network_memory`` is ``(available, total)`` memory segments of the task process's
    NetworkBufferPool, read on the task thread right before it reported ``state`` (for a
    terminal state: after the task released its partitions and gates)."""

    attempt_id: str
    state: str
    failure: Optional[bytes] = None
    snapshot: Any = None
    source_progress: int = 0
    network_memory: Optional[Tuple[int, int]] = None

    __repr__ = _short_repr


@dataclass(frozen=True, repr=False)
class TaskMetricsReport:
    """StreamTask → JobMaster every ``METRICS_INTERVAL``: the task's metrics, its source
    progress and ``network_memory``, ``(available, total)`` memory segments of its process's
    NetworkBufferPool."""

    attempt_id: str
    snapshot: Any
    source_progress: int
    network_memory: Optional[Tuple[int, int]] = None

    __repr__ = _short_repr


@dataclass(frozen=True)
class CancelTask:
    attempt_id: str


@dataclass(frozen=True)
class RequestSplit:
    """StreamTask → JobMaster: the next split for source ``node_id``'s subtask."""

    attempt_id: str
    request_id: int
    node_id: int
    subtask_index: int


@dataclass(frozen=True, repr=False)
class SplitResponse:
    """``split`` is a cloudpickled ``SourceSplit`` or ``None`` (no more splits); ``error`` a
    message when the enumerator failed; ``coordinator_checkpoint_id`` the coordinator's latest
    checkpoint when it assigned the split (``SourceCoordinator.assign_split``)."""

    request_id: int
    split: Optional[bytes]
    error: Optional[str] = None
    coordinator_checkpoint_id: int = 0

    __repr__ = _short_repr


@dataclass(frozen=True)
class ReportedWatermarkEvent:
    """StreamTask → JobMaster: source ``node_id``'s subtask has watermark ``watermark_ms`` in
    ``group`` (Flink's ``ReportedWatermarkEvent``, FLIP-182)."""

    attempt_id: str
    request_id: int
    node_id: int
    subtask_index: int
    group: str
    watermark_ms: int


@dataclass(frozen=True)
class WatermarkAlignmentEvent:
    """JobMaster → StreamTask: the group's minimum watermark (ms) after that report (Flink's
    ``WatermarkAlignmentEvent`` carries minimum + drift; here each subtask adds its own drift)."""

    request_id: int
    group_minimum_ms: int


# ---------------------------------------------------------------- checkpoints


@dataclass(frozen=True, repr=False)
class TriggerCheckpoint:
    """JobMaster → a source StreamTask: take checkpoint ``checkpoint_id`` (Flink's
    ``TaskExecutorGateway.triggerCheckpoint``). ``options`` is the cloudpickled
    ``CheckpointOptions`` (with the storage location)."""

    attempt_id: str
    checkpoint_id: int
    timestamp: int
    options: bytes

    __repr__ = _short_repr


@dataclass(frozen=True)
class NotifyCheckpointComplete:
    """JobMaster → every StreamTask: checkpoint ``checkpoint_id`` completed."""

    attempt_id: str
    checkpoint_id: int


@dataclass(frozen=True)
class NotifyCheckpointAborted:
    """JobMaster → every StreamTask: checkpoint ``checkpoint_id`` was aborted."""

    attempt_id: str
    checkpoint_id: int


@dataclass(frozen=True, repr=False)
class AcknowledgeCheckpoint:
    """StreamTask → JobMaster (Flink's ``AcknowledgeCheckpoint``): ``metrics`` a
    ``CheckpointMetrics``, ``subtask_state`` the cloudpickled ``{operator id: handle or None}``,
    ``task_finished`` whether the task's operators had finished (FLIP-147)."""

    attempt_id: str
    checkpoint_id: int
    metrics: Any
    subtask_state: bytes
    task_finished: bool = False

    __repr__ = _short_repr


@dataclass(frozen=True, repr=False)
class DeclineCheckpoint:
    """StreamTask → JobMaster (Flink's ``DeclineCheckpoint``): ``reason`` the cloudpickled
    exception."""

    attempt_id: str
    checkpoint_id: int
    reason: bytes

    __repr__ = _short_repr


# ---------------------------------------------------------------- savepoints


@dataclass(frozen=True)
class TriggerSavepoint:
    """client → Dispatcher → JobMaster: take a savepoint of ``job_id`` under
    ``target_directory`` (``None``: the configured default); with ``drain`` not ``None`` it is
    stop-with-savepoint (``drain``: emit ``MAX_WATERMARK`` first). The Dispatcher answers at once
    with :class:`SavepointTriggered` (or a failed :class:`SavepointStatusReport` for a job it
    does not run) and forwards it with ``trigger_id`` set."""

    job_id: str
    target_directory: Optional[str] = None
    drain: Optional[bool] = None
    trigger_id: str = ""
    #: savepoint then cancel (Flink's cancel-with-savepoint); only with ``drain`` ``None``
    cancel_job: bool = False


@dataclass(frozen=True)
class SavepointTriggered:
    """Dispatcher → client: the savepoint operation's id (Flink's ``TriggerResponse``)."""

    job_id: str
    trigger_id: str


@dataclass(frozen=True)
class RequestSavepointStatus:
    """client → Dispatcher: the status of savepoint operation ``trigger_id``."""

    job_id: str
    trigger_id: str


@dataclass(frozen=True)
class SavepointStatusReport:
    """JobMaster → Dispatcher when a savepoint operation ended, Dispatcher → client on request
    (Flink's ``AsynchronousOperationResult``): ``status`` ``IN_PROGRESS``, ``COMPLETED`` or,
    for an unknown job or trigger id, ``UNKNOWN``; ``location`` the savepoint's directory;
    ``failure_cause`` why it failed."""

    job_id: str
    trigger_id: str
    status: str
    location: Optional[str] = None
    failure_cause: Optional[str] = None


# ---------------------------------------------------------------- channel timelines on demand


@dataclass(frozen=True)
class ChannelTimelineRequest:
    """client → Dispatcher → JobMaster: start recording the channel timelines of ``job_id``'s
    tasks with ``settings`` (a ``ChannelTimelineSettings``), or stop the recording
    (``settings`` ``None``). The Dispatcher forwards it with ``reply_to`` set to the asker;
    the answer is a :class:`ChannelTimelineResponse` with the same ``request_id``."""

    job_id: str
    request_id: str
    settings: Any = None
    reply_to: Any = None


@dataclass(frozen=True)
class ChannelTimelineResponse:
    """JobMaster (or Dispatcher) → client: ``error`` ``None`` when done (``files``: the paths
    written, for a stop), else why not with ``error_kind`` ``"not-found"`` (no such job) or
    ``"conflict"`` (not running, recording already, nothing to stop)."""

    request_id: str
    files: Optional[List[str]] = None
    error: Optional[str] = None
    error_kind: Optional[str] = None


@dataclass(frozen=True)
class StartChannelTimeline:
    """JobMaster → StreamTask: record the task's channel timeline with ``settings``."""

    attempt_id: str
    settings: Any


@dataclass(frozen=True)
class StopChannelTimeline:
    """JobMaster → StreamTask: end the recording; answered by :class:`ChannelTimelineStopped`."""

    attempt_id: str


@dataclass(frozen=True)
class ChannelTimelineStopped:
    """StreamTask → JobMaster: the task's timeline file (``None``: nothing recorded, or
    ``error``: it could not be written)."""

    attempt_id: str
    path: Optional[str]
    error: Optional[str] = None
