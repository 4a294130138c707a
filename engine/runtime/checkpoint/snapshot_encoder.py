"""Encoding large snapshots in a helper process, so that the task's interpreter does not pay
for them.

The asynchronous part of a checkpoint builds Arrow columns from the pinned key-group dicts
and writes Parquet: per entry, Python work. On the checkpoint thread of the task's process it
competes with the task thread for the GIL, so a large state slows the job down for as long
as every checkpoint is being written (WordCount with 73,000 words: ~0.6 s of each 1 s
interval; issue 11's "at most 10% slower" was missed). Flink's asynchronous part runs on a
thread of a JVM without a global lock; the Python equivalent of that thread is a process.

:class:`SnapshotEncoder` keeps one helper process per interpreter (started on first use with
``python -m rill.runtime.checkpoint.snapshot_encoder``: a fresh interpreter that imports
only Rill, never the user's main module) and hands it ``(location, operator id, subtask,
OperatorSubtaskState)``; the helper runs the same
:meth:`~rill.state.checkpoint.storage_api.CheckpointStorageLocation.write_operator_subtask_state`
and sends the handle back. The task's process only pickles the pinned dicts (C-level, a few
ms for 100,000 entries) and waits with the GIL released.

Used (:func:`write_operator_subtask_state`) when all of these hold, otherwise the state is
written on the calling thread as before:

- the location is a :class:`~rill.state.checkpoint.filesystem.FileSystemCheckpointStorageLocation`
  on the local file system (the helper must see the same files; fsspec's ``memory://`` is
  per process);
- the keyed state is the heap backend's pinned view with at least :data:`MIN_ENTRIES` and at
  most :data:`MAX_ENTRIES` entries (below, feeding a process costs more than it saves; above,
  the helper's copy of the state would double the memory a huge heap state already takes;
  the RocksDB backend's view reads its database, which only its process may open);
- the state pickles (cloudpickle: values of user classes and TTL transformers included).

A helper that dies (killed, out of memory) is replaced at the next use; the write it was
doing falls back to the calling thread. Errors of the write itself (a value that does not fit
its declared type, a location disposed of meanwhile) are raised in the caller as they would
be on the calling thread.

Protocol (private to the pair, over the helper's stdin/stdout pipes; no network, so no
secret): frames of an 8-byte little-endian length and a pickle. Request: ``(location,
operator_id, subtask_index, state)``; reply: ``(True, handle)`` or ``(False, exception type
name, message, pickled exception or None)``. The helper exits at the end of its stdin: when
its parent closes it or dies.
"""

from __future__ import annotations

import atexit
import collections
import io
import logging
import os
import pickle
import subprocess
import sys
import threading
import time
from typing import Any, BinaryIO, Optional

import cloudpickle

from rill.state.checkpoint.filesystem import FileSystemCheckpointStorageLocation
from rill.state.checkpoint.key_group_views import PinnedKeyGroups
from rill.state.checkpoint.operator_subtask_state import OperatorSubtaskState
from rill.state.checkpoint.storage_api import CheckpointStorageLocation

__all__ = ["MIN_ENTRIES", "MAX_ENTRIES", "SnapshotEncoder", "EncoderUnavailable", "write_operator_subtask_state",
           "default_encoder"]

_LOG = logging.getLogger(__name__)

#: Keyed-state entries from which a snapshot is written by the helper process.
MIN_ENTRIES = 20_000
#: Keyed-state entries above which it is written in the task's process again (memory).
MAX_ENTRIES = 5_000_000

_HEADER = 8


class EncoderUnavailable(Exception):
    """The helper process could not take the request (it could not start, died, or the state
    does not pickle); the caller writes the state itself."""


def _pinned_raw(view: PinnedKeyGroups):
    # the pinned dicts themselves (C-level pickling), not the entry tuples PinnedKeyGroups'
    # own reduction builds in Python for the JobMaster
    return PinnedKeyGroups, view.raw_args()


class _Pickler(cloudpickle.Pickler):
    # read when a pickler is created (the C pickler's rule)
    dispatch_table = collections.ChainMap({PinnedKeyGroups: _pinned_raw}, cloudpickle.Pickler.dispatch_table)


def _dumps(obj: Any) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


def _write_frame(out: BinaryIO, payload: bytes) -> None:
    out.write(len(payload).to_bytes(_HEADER, "little"))
    out.write(payload)
    out.flush()


def _read_frame(inp: BinaryIO) -> Optional[bytes]:
    header = inp.read(_HEADER)
    if len(header) < _HEADER:
        return None
    n = int.from_bytes(header, "little")
    payload = inp.read(n)
    if len(payload) < n:
        return None
    return payload


def entry_count(state: OperatorSubtaskState) -> Optional[int]:
    """The keyed-state entries of ``state`` if all of its keyed state is the heap backend's
    pinned view (what the helper can take), else ``None``."""
    total = 0
    for snapshot in state.keyed_state:
        if not isinstance(snapshot.key_groups, PinnedKeyGroups):
            return None
        total += snapshot.key_groups.entry_count()
    return total


def _local(location: CheckpointStorageLocation) -> bool:
    if type(location) is not FileSystemCheckpointStorageLocation:
        return False
    directory = location.directory
    return "://" not in directory or directory.startswith("file://")


class SnapshotEncoder:
    """One helper process writing snapshots (see the module). Thread-safe: concurrent calls
    (the checkpoint threads of the tasks of one process) are served one after the other."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: Optional[subprocess.Popen] = None
        #: requests the helper answered (embedded tests look at it)
        self.requests = 0

    @property
    def pid(self) -> Optional[int]:
        """The helper's pid, or ``None`` while none runs."""
        proc = self._proc
        return None if proc is None or proc.poll() is not None else proc.pid

    def _started(self) -> subprocess.Popen:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            return proc
        env = dict(os.environ)
        # what the task could import (the job's modules, for values of user classes)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        try:
            proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    env=env, close_fds=True)
        except OSError as e:
            raise EncoderUnavailable(f"cannot start the snapshot encoder process: {e}") from e
        self._proc = proc
        return proc

    def write(self, location: CheckpointStorageLocation, operator_id: str, subtask_index: int,
              state: OperatorSubtaskState) -> Any:
        """``location.write_operator_subtask_state(operator_id, subtask_index, state)`` in the
        helper process; returns its handle.

        :raises EncoderUnavailable: if the state does not pickle or the helper cannot start or
            died; nothing was acknowledged, the caller may write the state itself.
        :raises Exception: what the write raised in the helper (``TypeValueError``,
            ``CheckpointLocationDisposedError``, ``OSError``...), as the write on the calling
            thread would have.
        """
        try:
            payload = _dumps((location, operator_id, subtask_index, state))
        except Exception as e:  # noqa: BLE001 - an unpicklable value: write it in process
            raise EncoderUnavailable(f"the snapshot does not pickle: {type(e).__name__}: {e}") from e
        with self._lock:
            proc = self._started()
            try:
                _write_frame(proc.stdin, payload)
                del payload
                reply = _read_frame(proc.stdout)
            except (OSError, ValueError) as e:  # broken pipe: the helper died
                reply = None
                _LOG.debug("snapshot encoder %d: %s", proc.pid, e)
            if reply is None:
                self._stop(proc)
                raise EncoderUnavailable(f"the snapshot encoder process (pid {proc.pid}) exited "
                                         f"with code {proc.returncode}")
            self.requests += 1
        result = pickle.loads(reply)
        if result[0]:
            return result[1]
        _, type_name, message, pickled = result
        if pickled is not None:
            try:
                error = pickle.loads(pickled)
            except Exception:  # noqa: BLE001 - an exception that does not unpickle: its text
                error = None
            if isinstance(error, BaseException):
                raise error
        raise RuntimeError(f"{type_name}: {message}")

    def _stop(self, proc: subprocess.Popen) -> None:
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()  # our own child, known by its Popen
            proc.wait()
        if self._proc is proc:
            self._proc = None

    def close(self) -> None:
        """Stop the helper (its stdin closes, it exits); idempotent."""
        with self._lock:
            if self._proc is not None:
                self._stop(self._proc)


_default: Optional[SnapshotEncoder] = None
_default_pid = -1
_default_lock = threading.Lock()


def default_encoder() -> SnapshotEncoder:
    """This process's :class:`SnapshotEncoder` (created on first use, closed at exit). A
    forked child gets its own: the parent's pipes are not its helper's."""
    global _default
    with _default_lock:
        if _default is None or _default_pid != os.getpid():
            _set_default(SnapshotEncoder())
        return _default


def _set_default(encoder: SnapshotEncoder) -> None:
    global _default, _default_pid
    _default, _default_pid = encoder, os.getpid()
    atexit.register(encoder.close)


def write_operator_subtask_state(location: CheckpointStorageLocation, operator_id: str, subtask_index: int,
                                 state: OperatorSubtaskState) -> Any:
    """Write one operator's subtask state through ``location``: in the helper process when the
    module's conditions hold, else (or when the helper is unavailable) on the calling thread.

    :raises Exception: what ``location.write_operator_subtask_state`` raises.
    """
    if _local(location):
        entries = entry_count(state)
        if entries is not None and MIN_ENTRIES <= entries <= MAX_ENTRIES:
            try:
                return default_encoder().write(location, operator_id, subtask_index, state)
            except EncoderUnavailable as e:
                _LOG.warning("operator %s (subtask %d): writing its snapshot in the task's process: %s",
                             operator_id, subtask_index, e)
    return location.write_operator_subtask_state(operator_id, subtask_index, state)


def _serve(inp: BinaryIO, out: BinaryIO) -> None:
    while True:
        request = _read_frame(inp)
        if request is None:
            return
        state = None
        try:
            location, operator_id, subtask_index, state = pickle.loads(request)
            del request
            reply = pickle.dumps((True, location.write_operator_subtask_state(operator_id, subtask_index, state)),
                                 protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as e:  # noqa: BLE001 - every failure goes back to the task
            try:
                pickled = cloudpickle.dumps(e)
            except Exception:  # noqa: BLE001
                pickled = None
            reply = pickle.dumps((False, type(e).__name__, str(e), pickled))
        del state
        _write_frame(out, reply)


def _exit_when_orphaned(parent_pid: int) -> None:
    # stdin ends when the parent exits, unless a process the parent forked without exec holds
    # its end of the pipe too: then the parent's death is seen here
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    os._exit(0)


def main() -> None:
    """The helper's loop: requests from stdin, replies to stdout, until stdin ends or the
    parent process is gone."""
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the replies
    threading.Thread(target=_exit_when_orphaned, args=(os.getppid(),), name="orphan watch", daemon=True).start()
    try:
        _serve(inp, out)
    except BrokenPipeError:  # the task's process is gone
        pass


if __name__ == "__main__":
    main()
