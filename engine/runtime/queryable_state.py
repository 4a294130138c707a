"""Queryable state: a running job's keyed state read by key from the host (Flink's Queryable
State: ``KvStateLocationOracle`` + ``KvStateServer``, with the task's mailbox instead of a
concurrent state table).

The route of a request ``(uid, state_name, key)``, as Flink's ``KeyGroupRangeAssignment``:

1. the operator: its id is ``murmur3_128(uid)`` (the StreamGraphHasherV2 hash a ``uid`` gives),
   looked up in the chained operators of every JobVertex;
2. the subtask: ``key_group = murmur(stable_key_hash(key)) % max_parallelism`` and
   ``subtask = key_group * parallelism // max_parallelism``;
3. the state: read on that subtask's task thread by a mail (:func:`answer_state_query`), so
   the read never races a write of the operator: the value is consistent per key, and the job
   is not paused (the mail runs between two input batches, as a timer does).

Embedded mode: :func:`query_embedded_state` with the job's ``JobMaster``, whose tasks are
threads of this process. Cluster mode sends the same :class:`StateQuery` to the JobMaster actor,
which forwards it to the owning StreamTask actor (see ``rill.runtime.cluster``).

Differences from Flink, and why: no state is marked queryable (``set_queryable``) and no proxy
server runs; every keyed state of an operator with a ``uid`` can be read, through the job's own
client. Values are Python objects (cloudpickled between processes), not bytes a client must
deserialize. A key without an entry answers ``None`` instead of failing.
"""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

from rill.graph.hashing import murmur3_128
from rill.graph.states import ExecutionState, JobStatus
from rill.runtime.mailbox.mail import MailPriority
from rill.runtime.mailbox.task_mailbox import MailboxClosedError
from rill.state.key_groups import assign_to_key_group, compute_operator_index_for_key_group
from rill.state.queryable import (
    JobNotRunningError,
    NotKeyedOperatorError,
    QueryableStateError,
    UnknownOperatorUidError,
    UnknownStateNameError,
    read_keyed_state,
)

__all__ = [
    "StateQuery",
    "QueryableStateError",
    "UnknownOperatorUidError",
    "UnknownStateNameError",
    "NotKeyedOperatorError",
    "JobNotRunningError",
    "operator_id_of_uid",
    "locate_key",
    "answer_state_query",
    "submit_state_query",
    "find_owner_task",
    "query_embedded_state",
]


@dataclass(frozen=True)
class StateQuery:
    """One request: the operator's ``uid``, the state's descriptor name and the key.

    :param operator_id: hex of ``murmur3_128(uid)``, the operator id the uid gives.
    """

    uid: str
    state_name: str
    key: Any
    operator_id: str

    @staticmethod
    def of(uid: str, state_name: str, key: Any) -> "StateQuery":
        """:raises TypeError: if ``uid`` or ``state_name`` is not a non-empty ``str``."""
        for what, value in (("uid", uid), ("state_name", state_name)):
            if not isinstance(value, str) or not value:
                raise TypeError(f"get_state: {what} must be a non-empty str, got {value!r}")
        return StateQuery(uid, state_name, key, operator_id_of_uid(uid))


def operator_id_of_uid(uid: str) -> str:
    """The hex operator id of an operator whose ``uid`` is ``uid`` (StreamGraphHasherV2)."""
    return murmur3_128(uid.encode("utf-8")).hex()


def _find_config(vertices, query: StateQuery) -> Tuple[Any, Any]:
    """(vertex, StreamConfig) of the operator with the query's uid.

    :raises UnknownOperatorUidError, NotKeyedOperatorError:
    """
    uids: List[str] = []
    for vertex in vertices:
        for cfg in vertex.stream_configs.values():
            if cfg.operator_id == query.operator_id:
                if not cfg.is_keyed():
                    raise NotKeyedOperatorError(
                        f"Operator '{cfg.operator_name}' (uid {query.uid!r}) has no keyed state: only "
                        "an operator after key_by has state readable by key")
                return vertex, cfg
            uids.append(cfg.operator_name)
    raise UnknownOperatorUidError(
        f"No operator of the job has uid {query.uid!r} (set one with .uid({query.uid!r}) on the "
        f"keyed operator; operators of the job: {uids})")


def locate_key(vertices, query: StateQuery) -> Tuple[Any, Any, int]:
    """(vertex, StreamConfig, subtask index) owning ``query.key``, by Flink's
    ``KeyGroupRangeAssignment``.

    :param vertices: the job's JobVertices (each with ``stream_configs``).
    :raises UnknownOperatorUidError: no operator has the uid.
    :raises NotKeyedOperatorError: the operator is not keyed.
    :raises UnsupportedKeyError: the key has no stable hash.
    """
    vertex, cfg = _find_config(vertices, query)
    key_group = assign_to_key_group(query.key, cfg.max_parallelism)
    return vertex, cfg, compute_operator_index_for_key_group(cfg.max_parallelism, cfg.parallelism, key_group)


def answer_state_query(stream_task: Any, query: StateQuery) -> Any:
    """Read the query's state on ``stream_task``'s thread (call it from a mail).

    :raises JobNotRunningError: if the task's operators are not built.
    :raises UnknownOperatorUidError: if no operator of the task's chain has the uid.
    :raises UnknownStateNameError: see :func:`rill.state.queryable.read_keyed_state`.
    """
    chain = stream_task.operator_chain
    if chain is None:
        raise JobNotRunningError(f"task {stream_task.env.task_name_with_subtasks} has not built its operators")
    for cfg, op in chain.all_operators:
        if cfg.operator_id == query.operator_id:
            backend = op.context.keyed_state_backend
            if backend is None:
                raise NotKeyedOperatorError(f"Operator '{cfg.operator_name}' (uid {query.uid!r}) has no keyed state")
            return read_keyed_state(backend, query.state_name, query.key, cfg.operator_name)
    raise UnknownOperatorUidError(
        f"task {stream_task.env.task_name_with_subtasks} runs no operator with uid {query.uid!r}")


def submit_state_query(stream_task: Any, query: StateQuery) -> "concurrent.futures.Future[Any]":
    """Post the read as a mail on ``stream_task``'s mailbox; a future of the value (thread-safe).

    The future fails with :class:`JobNotRunningError` if the mailbox no longer takes mails or
    drops the mail when it closes (the task ended first).
    """
    answer: "concurrent.futures.Future[Any]" = concurrent.futures.Future()
    name = stream_task.env.task_name_with_subtasks
    executor = stream_task.mailbox_processor.get_mailbox_executor(MailPriority.DEFAULT)
    try:
        inner = executor.submit(lambda: answer_state_query(stream_task, query),
                                f"state query {query.uid}/{query.state_name}")
    except MailboxClosedError:
        answer.set_exception(JobNotRunningError(f"task {name} has ended: state {query.state_name!r} of uid "
                                                f"{query.uid!r} can no longer be read"))
        return answer

    def done(f: "concurrent.futures.Future[Any]") -> None:
        if f.cancelled():
            answer.set_exception(JobNotRunningError(
                f"task {name} ended before it answered the query of state {query.state_name!r} (uid {query.uid!r})"))
        elif f.exception() is not None:
            answer.set_exception(f.exception())
        else:
            answer.set_result(f.result())

    inner.add_done_callback(done)
    return answer


def find_owner_task(job_master: Any, query: StateQuery) -> Any:
    """The task (embedded ``Task`` or the cluster JobMaster's ``RemoteTask``) owning
    ``query.key`` in the operator with ``query.uid``.

    :raises UnknownOperatorUidError, NotKeyedOperatorError, UnsupportedKeyError: see
        :func:`locate_key`.
    :raises JobNotRunningError: if the job, or that task, is not RUNNING.
    """
    vertex, cfg, subtask = locate_key(job_master.job_graph.get_vertices(), query)
    status = job_master.status
    if status is not JobStatus.RUNNING:
        raise JobNotRunningError(
            f"job {job_master.job_id} is {status.name}: state {query.state_name!r} of operator "
            f"'{cfg.operator_name}' (uid {query.uid!r}) is readable only while the job runs")
    task: Optional[Any] = None
    for t in list(job_master.tasks):
        if t.tdd.vertex.id == vertex.id and t.tdd.subtask_index == subtask:
            task = t
    if task is None or task.execution_state is not ExecutionState.RUNNING:
        state = "not deployed" if task is None else task.execution_state.name
        raise JobNotRunningError(
            f"subtask {subtask} of '{cfg.operator_name}' (uid {query.uid!r}), owner of key {query.key!r}, "
            f"is {state}: its state is readable only while it runs")
    return task


def query_embedded_state(job_master: Any, query: StateQuery) -> "concurrent.futures.Future[Any]":
    """A future of the value of ``query`` in a job of this process (embedded mode).

    Errors about the request (:class:`UnknownOperatorUidError`, :class:`NotKeyedOperatorError`,
    ``UnsupportedKeyError``) raise at once; :class:`JobNotRunningError` raises at once when the
    job or the owning task is not RUNNING, else arrives in the future if the task ends before
    the mail ran. :class:`UnknownStateNameError` arrives in the future (only the task thread
    knows its registered states).
    """
    task = find_owner_task(job_master, query)
    if task.invokable is None:
        raise JobNotRunningError(f"task {task.task_name_with_subtasks} has not started its operators")
    return submit_state_query(task.invokable, query)
