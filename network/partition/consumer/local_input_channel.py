"""An input channel whose producer runs in the same process (Flink's ``LocalInputChannel``)."""

from __future__ import annotations

from typing import Optional

from ..exceptions import PartitionReleasedError
from ..result_partition_id import ResultPartitionID
from ..result_partition_manager import ResultPartitionManager
from ..result_subpartition_view import ResultSubpartitionView
from .input_channel import BufferAndAvailability, InputChannel

__all__ = ["LocalInputChannel"]


class LocalInputChannel(InputChannel):
    """Reads a subpartition of a partition registered in this process's partition manager.

    No copy, no serialization, no credit: the consumer polls the subpartition's view directly
    and receives the producer's buffer objects. Flow control comes from the producer's bounded
    buffer pool, whose slots the consumer returns by recycling buffers.

    :param partition_manager: the process's :class:`ResultPartitionManager`.
    :param partition_id: the producer's :class:`ResultPartitionID`.
    :param subpartition_index: which subpartition of it this channel reads (normally the
        consuming subtask's index, for all-to-all edges).
    """

    def __init__(
        self,
        partition_manager: ResultPartitionManager,
        partition_id: ResultPartitionID,
        subpartition_index: int,
    ) -> None:
        super().__init__(partition_id)
        self.partition_manager = partition_manager
        self.subpartition_index = subpartition_index
        self._view: Optional[ResultSubpartitionView] = None
        self._released = False

    def request_subpartition(self) -> None:
        if self._view is not None:
            return
        if self._released:
            raise RuntimeError(f"{self!r} is released")
        view = self.partition_manager.create_subpartition_view(
            self.partition_id, self.subpartition_index, self.notify_channel_non_empty
        )
        set_priority_listener = getattr(view, "set_priority_listener", None)
        if set_priority_listener is not None:
            set_priority_listener(self.notify_priority_event)
        self._view = view

    def get_next_buffer(self) -> Optional[BufferAndAvailability]:
        view = self._view
        if view is None:
            if self._released:
                return None
            raise RuntimeError(f"{self!r} was polled before request_subpartition()")
        result = view.get_next_buffer()
        if result is None:
            if not self._released and view.is_released():
                cause = view.get_failure_cause()
                raise PartitionReleasedError(self.partition_id, self.subpartition_index, cause) from cause
            return None
        return BufferAndAvailability(result.item, result.more_available)

    def has_priority_event(self) -> bool:
        view = self._view
        return view is not None and not self._released and view.has_priority_event()

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        view = self._view
        if view is not None:
            view.release()

    def is_released(self) -> bool:
        return self._released

    def __repr__(self) -> str:
        return (
            f"LocalInputChannel(index={self.channel_index}, partition={self.partition_id}, "
            f"subpartition={self.subpartition_index})"
        )
