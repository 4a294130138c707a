"""The unit that crosses a task boundary: a batch of records plus the way to give it back.

Follows Flink's ``org.apache.flink.runtime.io.network.buffer.Buffer`` / ``NetworkBuffer`` and
``BufferRecycler``, with one deliberate difference, taken for speed: **in-process, a Rill buffer
holds Python objects, not bytes.** Flink serializes every record into a 32 KiB memory segment,
even between two tasks of the same TaskManager; Rill hands the list of record values (and the
parallel list of timestamps) to the consumer thread as is, so a local exchange costs no
serialization at all. Consequences:

* a buffer is "full" at a number of *records* (``records_per_buffer``, default 1024), not bytes;
* the consumer sees the *same* record objects the producer emitted (as Flink's object-reuse mode
  does inside a chain): neither side may mutate a record after it was emitted, and a broadcast
  record is shared by every consumer;
* serialization into 32 KiB byte segments (msgpack, optional lz4) arrives with remote channels,
  which will carry the same ``Buffer`` type once decoded on the receiving side.

A buffer that came from a :class:`~rill.network.buffer.buffer_pool.LocalBufferPool` must be
recycled exactly once, by whoever processed it last (the consuming task, after its operators ran
over the records): that returns its slot to the pool and is what releases backpressure.
"""

from __future__ import annotations

import abc
from typing import Optional

__all__ = ["Buffer", "BufferRecycler"]


class BufferRecycler(abc.ABC):
    """Takes a buffer back when its consumer is done with it (Flink's ``BufferRecycler``).

    ``recycle`` is called from the consumer's thread, so implementations must be thread-safe.
    """

    @abc.abstractmethod
    def recycle(self, buffer: "Buffer") -> None:
        """Return ``buffer`` to its owner. Called once per buffer, by :meth:`Buffer.recycle_buffer`."""


class Buffer:
    """A batch of records travelling between two tasks (Flink's ``Buffer``).

    :param values: the record values, in emission order (``list``, ``len(values)`` records).
        The buffer takes ownership of the list: the producer must not touch it afterwards and the
        consumer must treat it as read-only.
    :param timestamps: ``None`` if no record carries an event timestamp, otherwise a ``list`` of
        ``int`` epoch-ms timestamps, one per value (same length as ``values``).
    :param recycler: where :meth:`recycle_buffer` returns the buffer; ``None`` for an unpooled
        buffer, whose recycling only marks it recycled.

    Thread-safety: a buffer is owned by one thread at a time (producer, then consumer, handed over
    through a subpartition's lock); it is not safe to share between threads otherwise.

    :ivar serialized: ``None``, or what the producer's thread made of the records for a remote
        consumer (see :meth:`~rill.network.partition.pipelined_subpartition.PipelinedSubpartition.set_remote_serializer`):
        ``(payload, compressed, number_of_records)`` -- ``values`` is then empty -- or the
        exception serializing them raised (``values`` kept, for the error message).
    """

    __slots__ = ("values", "timestamps", "serialized", "_recycler", "_recycled")

    def __init__(
        self,
        values: list,
        timestamps: Optional[list[int]] = None,
        recycler: Optional[BufferRecycler] = None,
    ) -> None:
        self.values = values
        self.timestamps = timestamps
        self.serialized = None
        self._recycler = recycler
        self._recycled = False

    def is_buffer(self) -> bool:
        """Always ``True``: events travel as their own queue entries, never inside a buffer
        (Flink's ``Buffer.isBuffer()`` is ``False`` for serialized events)."""
        return True

    def get_size(self) -> int:
        """Number of records in the buffer (Flink's ``getSize()`` counts bytes instead)."""
        return len(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def get_recycler(self) -> Optional[BufferRecycler]:
        """The pool (or other recycler) this buffer returns to; ``None`` if unpooled."""
        return self._recycler

    def is_recycled(self) -> bool:
        """Whether :meth:`recycle_buffer` was called."""
        return self._recycled

    def recycle_buffer(self) -> None:
        """Give the buffer back to its recycler (its pool); call once, after processing it.

        The buffer's lists are dropped, so a record list kept by mistake after recycling is not
        silently overwritten by a later batch.

        :raises RuntimeError: if the buffer was already recycled (Flink's reference-count
            ``IllegalReferenceCountException``): recycling twice would hand out a pool slot
            twice and break the bound on buffers in flight.
        """
        if self._recycled:
            raise RuntimeError(f"{self!r} was already recycled")
        self._recycled = True
        self.values = []
        self.timestamps = None
        self.serialized = None
        recycler = self._recycler
        if recycler is not None:
            recycler.recycle(self)

    def __repr__(self) -> str:
        state = "recycled" if self._recycled else f"{len(self.values)} records"
        ts = "" if self.timestamps is None else ", with timestamps"
        return f"Buffer({state}{ts})"

    def set_contents(self, values: list, timestamps: Optional[list[int]] = None) -> "Buffer":
        """Fill a buffer handed out by a pool with ``values`` (and ``timestamps``); returns self.

        :raises RuntimeError: if the buffer was recycled already.
        :raises ValueError: if ``timestamps`` is not ``None`` and its length differs from
            ``len(values)``.
        """
        if self._recycled:
            raise RuntimeError(f"{self!r} was recycled and cannot be refilled")
        if timestamps is not None and len(timestamps) != len(values):
            raise ValueError(
                f"timestamps has {len(timestamps)} entries for {len(values)} values; "
                "there must be one timestamp per value"
            )
        self.values = values
        self.timestamps = timestamps
        self.serialized = None
        return self

