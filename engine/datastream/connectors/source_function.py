"""Legacy ``SourceFunction`` s on the Source API: ``env.add_source(fn)`` becomes a non-parallel
:class:`SourceFunctionSource` whose reader runs ``fn.run(ctx)`` in a thread of its own (Flink's
``StreamSource`` runs it in ``LegacySourceFunctionThread``, beside the task's mailbox thread).

The function's records reach the task thread in batches: ``ctx.collect`` appends to a buffer
and blocks while ``max_buffered`` records wait (backpressure); the reader hands over the whole
buffer at once. When the task ends (finished, cancelled or failed) the reader calls
``fn.cancel()``, frees a blocked ``collect`` and joins the thread.
"""

from __future__ import annotations

import threading
from typing import Any, Iterator, List, Optional

from rill.common.connector.source import Boundedness, Source, SourceReader, SourceSplit
from rill.common.functions import SourceFunction

__all__ = ["SourceFunctionSource"]

#: records the function may emit ahead of the task before ``collect`` blocks
MAX_BUFFERED = 4096


class _Cancelled(Exception):
    """Raised in the function's thread by ``collect`` once the source is closed."""


class _OneSplit(SourceSplit):
    def split_id(self) -> str:
        return "source-function"


class _Context(SourceFunction.SourceContext):
    def __init__(self, reader: "_SourceFunctionReader"):
        self._reader = reader
        self._lock = threading.RLock()

    def collect(self, element: Any) -> None:
        r = self._reader
        with r.cond:
            while len(r.buffer) >= r.max_buffered and not r.closed:
                r.cond.wait()
            if r.closed:
                raise _Cancelled()
            r.buffer.append(element)

    def collect_with_timestamp(self, element: Any, timestamp: int) -> None:
        raise NotImplementedError("SourceContext.collect_with_timestamp is not implemented: records of Rill's "
                                  "sources carry no timestamps; use assign_timestamps_and_watermarks")

    def emit_watermark(self, watermark: Any) -> None:
        raise NotImplementedError("SourceContext.emit_watermark is not implemented: use "
                                  "assign_timestamps_and_watermarks after add_source")

    def mark_as_temporarily_idle(self) -> None:
        """A no-op: a source without watermarks holds no watermark back."""

    def get_checkpoint_lock(self) -> Any:
        return self._lock


class _SourceFunctionReader(SourceReader):
    def __init__(self, function: SourceFunction, max_buffered: int):
        self.function = function
        self.max_buffered = max_buffered
        self.cond = threading.Condition()
        self.buffer: List[Any] = []
        self.closed = False
        self._ended = False
        self._error: Optional[BaseException] = None
        self._thread: Optional[threading.Thread] = None

    def _run(self) -> None:
        try:
            self.function.run(_Context(self))
        except _Cancelled:
            pass
        except BaseException as e:  # noqa: BLE001 - the job fails with it, in the task thread
            self._error = e
        finally:
            with self.cond:
                self._ended = True

    def read(self, split: SourceSplit) -> Iterator[List[Any]]:
        self._thread = threading.Thread(target=self._run, name="Legacy Source Thread", daemon=True)
        self._thread.start()
        while True:
            with self.cond:
                batch, self.buffer = self.buffer, []
                ended, error = self._ended, self._error
                if batch:
                    self.cond.notify_all()
            if batch:
                self.progress_units += len(batch)
                yield batch
            elif error is not None:
                raise error
            elif ended:
                return
            else:
                yield []  # nothing yet: the task waits on its mailbox and asks again

    def close(self) -> None:
        if self._thread is None:
            return
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        if self._thread.is_alive():
            self.function.cancel()
        self._thread.join()


class SourceFunctionSource(Source):
    """A legacy :class:`SourceFunction` as a non-parallel Source (Flink's
    ``LegacySourceTransformation``; unbounded, as Flink declares legacy sources, though the
    stream ends when ``run`` returns).

    :raises TypeError: if ``function`` is not a ``SourceFunction``.
    """

    non_parallel = True

    def __init__(self, function: SourceFunction, max_buffered: int = MAX_BUFFERED):
        if not isinstance(function, SourceFunction):
            raise TypeError(f"add_source expects a SourceFunction or a Source, got {type(function).__name__}")
        self.function = function
        self.max_buffered = max_buffered

    def get_boundedness(self) -> Boundedness:
        return Boundedness.CONTINUOUS_UNBOUNDED

    @property
    def supports_replay(self) -> bool:
        """``False``: ``run`` emits what it reads once; a restore cannot read it again (see
        ``Source.supports_replay``)."""
        return False

    def create_splits(self, parallelism: int) -> List[SourceSplit]:
        return [_OneSplit()]

    def create_reader(self) -> SourceReader:
        return _SourceFunctionReader(self.function, self.max_buffered)
