"""The input side of a task for one consumed intermediate result (Flink's ``InputGate``)."""

from __future__ import annotations

import abc
from typing import Callable, Optional

from .buffer_or_event import BufferOrEvent

__all__ = ["InputGate"]


class InputGate(abc.ABC):
    """Reads a task's input channels as one stream of :class:`BufferOrEvent`.

    Implementations: :class:`~rill.network.partition.consumer.single_input_gate.SingleInputGate`
    (one intermediate result); a ``UnionInputGate`` over several gates may follow.

    Threading: :meth:`poll_next` is called by the consuming task's thread only; the availability
    listener fires from producer (or network) threads.
    """

    @abc.abstractmethod
    def setup(self) -> None:
        """Request every channel's subpartition. Call once before polling."""

    @abc.abstractmethod
    def poll_next(self) -> Optional[BufferOrEvent]:
        """The next buffer or event from some channel, or ``None`` if nothing is available.
        Never blocks."""

    @abc.abstractmethod
    def set_availability_listener(self, listener: Optional[Callable[[], None]]) -> None:
        """Set the callback fired when the gate goes from nothing-to-read to something-to-read."""

    @abc.abstractmethod
    def is_available(self) -> bool:
        """Whether :meth:`poll_next` would find something now (a snapshot)."""

    @abc.abstractmethod
    def is_finished(self) -> bool:
        """Whether every channel delivered EndOfPartition."""

    @abc.abstractmethod
    def get_number_of_input_channels(self) -> int:
        """The number of input channels (one per producer subpartition read)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release every channel. Idempotent."""
