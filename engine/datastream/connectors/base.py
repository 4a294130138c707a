"""Bases of connectors (PyFlink's ``pyflink.datastream.connectors.base``): ``Source`` (the
FLIP-27 Source API, :mod:`rill.common.connector.source`), ``Sink`` with its ``SinkWriter``
(Flink's Sink V2, FLIP-143/191) and ``DeliveryGuarantee``.
"""

from __future__ import annotations

import abc
import enum
from typing import Any, List

from rill.common.connector.source import Source

__all__ = ["Source", "Sink", "SinkWriter", "DeliveryGuarantee"]


class DeliveryGuarantee(enum.Enum):
    """What a sink promises under failover (Flink's ``DeliveryGuarantee``): ``EXACTLY_ONCE``
    (each record delivered once, with checkpoints and a committing sink), ``AT_LEAST_ONCE``
    (none lost, some may repeat), ``NONE`` (best effort)."""

    EXACTLY_ONCE = 0
    AT_LEAST_ONCE = 1
    NONE = 2


class SinkWriter(abc.ABC):
    """Writes one sink subtask's records (Flink's ``SinkWriter`` with its committables):
    :meth:`open` once, :meth:`write_batch` per batch of input, then :meth:`commit` when the
    subtask's input ends, or :meth:`abort` when it fails or is cancelled (what was written
    must then stay invisible)."""

    def open(self, subtask_index: int) -> None:
        """Called before the first batch with the subtask's index (0-based)."""

    @abc.abstractmethod
    def write_batch(self, values: List[Any]) -> None:
        """Write ``values`` (one call per batch of the input; never empty)."""

    @abc.abstractmethod
    def commit(self) -> List[Any]:
        """Make everything written visible; returns what was committed (e.g. file paths)."""

    def abort(self) -> None:
        """Drop what was not committed."""


class Sink:
    """A sink for ``DataStream.sink_to`` (Flink's Sink V2 ``Sink``): subclass it and implement
    :meth:`create_writer`, a factory of one :class:`SinkWriter` per subtask; its writers commit
    when their input ends (Rill's user sinks take no part in checkpoints yet). ``FileSink`` is
    a ``Sink`` too, run by its own exactly-once operator (:mod:`rill.operators.file_sink`).

    A sink is part of the job plan: it is shipped to every subtask (cloudpickle), so it holds
    settings, not open connections; the writer opens those.
    """

    def create_writer(self) -> SinkWriter:
        """A new writer for one subtask."""
        raise NotImplementedError(f"{type(self).__name__} does not implement Sink.create_writer")
