"""Queryable state in cluster mode: the messages and what each actor does with them (Flink's
``KvStateClientProxy`` → ``KvStateLocationOracle`` (JobMaster) → ``KvStateServer`` of the
TaskExecutor, with actor messages instead of a separate network protocol).

Route::

    client --KvStateRequest--> Dispatcher --(reply_to = client)--> JobMaster actor
    JobMaster actor: find the subtask owning the key (rill.runtime.queryable_state.find_owner_task)
        --KvStateRequest--> that StreamTask actor --(mail on the task's mailbox)--> task thread
    StreamTask actor --KvStateResponse--> client        (or the JobMaster / Dispatcher, on an error)

The query (its key is a user object) and the answer (a value or an exception) travel
cloudpickled. Every reply carries the request id; the client ignores stale replies of earlier
requests that timed out.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

import cloudpickle

from rill.runtime.queryable_state import (
    JobNotRunningError,
    QueryableStateError,
    StateQuery,
    find_owner_task,
    submit_state_query,
)

__all__ = ["KvStateRequest", "KvStateResponse", "ask_state", "route_in_dispatcher", "route_in_job_master",
           "answer_in_task"]

log = logging.getLogger("rill.cluster.kv_state")

_ids = itertools.count(1)


@dataclass(frozen=True)
class KvStateRequest:
    """Client → Dispatcher → JobMaster → StreamTask: read one key's state.

    :ivar query: the cloudpickled :class:`~rill.runtime.queryable_state.StateQuery`.
    :ivar reply_to: the client's address (set by the Dispatcher; the asker of a Dispatcher).
    """

    job_id: str
    request_id: int
    query: bytes
    reply_to: Any = None

    def __repr__(self) -> str:
        return f"KvStateRequest(job_id={self.job_id!r}, request_id={self.request_id})"


@dataclass(frozen=True)
class KvStateResponse:
    """The answer: ``value`` (cloudpickled) or ``error`` (a cloudpickled exception)."""

    request_id: int
    value: Optional[bytes] = None
    error: Optional[bytes] = None

    def __repr__(self) -> str:
        return f"KvStateResponse(request_id={self.request_id}, error={self.error is not None})"


def error_response(request_id: int, error: BaseException) -> KvStateResponse:
    """A response carrying ``error``; an exception that does not pickle travels as a
    :class:`QueryableStateError` with its type and message."""
    try:
        data = cloudpickle.dumps(error)
        cloudpickle.loads(data)
    except Exception:  # noqa: BLE001 - any pickling problem
        data = cloudpickle.dumps(QueryableStateError(f"{type(error).__name__}: {error}"))
    return KvStateResponse(request_id, None, data)


def route_in_dispatcher(job_masters: dict, msg: KvStateRequest, sender: Any,
                        send: Callable[[Any, Any], None]) -> None:
    """Dispatcher: forward ``msg`` to the job's JobMaster actor with the asker as ``reply_to``,
    or answer that the job does not run here."""
    jm = job_masters.get(msg.job_id)
    if jm is None:
        send(sender, error_response(msg.request_id, JobNotRunningError(
            f"job {msg.job_id} is not running on this cluster (finished, cancelled, failed or unknown): "
            "its state can no longer be read")))
        return
    send(jm, KvStateRequest(msg.job_id, msg.request_id, msg.query, sender))


def route_in_job_master(job_master: Any, msg: KvStateRequest, send: Callable[[Any, Any], None]) -> None:
    """JobMaster actor: forward ``msg`` to the StreamTask actor owning the key, or answer the
    client with the error (unknown uid, not keyed, not running)."""
    try:
        if job_master is None:
            raise JobNotRunningError(f"job {msg.job_id} is not running yet (no JobMaster)")
        query: StateQuery = cloudpickle.loads(msg.query)
        task = find_owner_task(job_master, query)
        if task.actor is None:
            raise JobNotRunningError(f"task {task.task_name_with_subtasks} has no process")
    except Exception as e:  # noqa: BLE001 - every error goes back to the asker
        send(msg.reply_to, error_response(msg.request_id, e))
        return
    send(task.actor, msg)


def answer_in_task(task: Any, msg: KvStateRequest, post: Callable[[Any, Any], None]) -> None:
    """StreamTask actor: post the read as a mail on the task's mailbox; ``post(target, message)``
    (the actor's outbox, any thread) sends the answer to the client when the mail has run."""
    request_id, reply_to = msg.request_id, msg.reply_to
    try:
        query: StateQuery = cloudpickle.loads(msg.query)
        if task is None or task.invokable is None:
            raise JobNotRunningError(f"the task owning key {query.key!r} has not started")
        future = submit_state_query(task.invokable, query)
    except Exception as e:  # noqa: BLE001
        post(reply_to, error_response(request_id, e))
        return

    def done(f) -> None:
        error = f.exception()
        if error is not None:
            post(reply_to, error_response(request_id, error))
            return
        try:
            post(reply_to, KvStateResponse(request_id, cloudpickle.dumps(f.result())))
        except Exception as e:  # noqa: BLE001 - a value that does not pickle
            post(reply_to, error_response(request_id, TypeError(
                f"the value of state {query.state_name!r} for key {query.key!r} cannot be pickled: {e}")))

    future.add_done_callback(done)


def ask_state(cluster_client: Any, job_id: str, query: StateQuery, timeout_s: float) -> Any:
    """Client: the value of ``query`` in job ``job_id`` of the cluster.

    :raises QueryableStateError: (its subclasses) as the task or JobMaster reported it.
    :raises TimeoutError: if no answer came within ``timeout_s`` seconds.
    """
    request_id = next(_ids)
    request = KvStateRequest(job_id, request_id, cloudpickle.dumps(query))
    deadline = time.monotonic() + timeout_s
    reply = cluster_client.ask_until(
        cluster_client.dispatcher, request,
        lambda r: isinstance(r, KvStateResponse) and r.request_id == request_id, deadline)
    if reply is None:
        raise TimeoutError(f"no answer to the query of state {query.state_name!r} (uid {query.uid!r}, key "
                           f"{query.key!r}) of job {job_id} within {timeout_s} s")
    if reply.error is not None:
        raise cloudpickle.loads(reply.error)
    return cloudpickle.loads(reply.value)
