"""Errors of the transport (Flink's ``TransportException`` family).

Every error that reaches a task names the channel (gate, index, partition, subpartition) and the
remote address, and carries the underlying cause as ``__cause__``/``cause``.
"""

from __future__ import annotations

from typing import Optional

from ..partition.exceptions import PartitionError, PartitionNotFoundError
from ..partition.result_partition_id import ResultPartitionID

__all__ = [
    "TransportError",
    "RemoteTransportError",
    "LocalTransportError",
    "AuthenticationError",
    "CorruptFrameError",
    "PartitionRequestTimeoutError",
]


class TransportError(PartitionError):
    """The transport failed for one channel.

    :ivar partition_id: the partition the channel reads.
    :ivar address: the ``(host, port)`` of the producer's server.
    :ivar cause: the underlying error, if any (also ``__cause__``).
    """

    def __init__(
        self,
        message: str,
        partition_id: ResultPartitionID,
        address: Optional[tuple] = None,
        cause: Optional[BaseException] = None,
    ) -> None:
        super().__init__(message, partition_id)
        self.address = address
        self.cause = cause
        if cause is not None:
            self.__cause__ = cause


class RemoteTransportError(TransportError):
    """The remote side closed the connection, sent something corrupt or reported an error
    (Flink's ``RemoteTransportException``)."""


class LocalTransportError(TransportError):
    """Connecting failed, or this side could not process what it received (Flink's
    ``LocalTransportException``)."""


class AuthenticationError(ConnectionError):
    """The peer did not prove knowledge of the shared secret (or refused ours)."""


class CorruptFrameError(ConnectionError):
    """A frame could not be parsed: bad length, unknown type, truncated header. The stream's
    framing can no longer be trusted, so the whole connection fails."""


class PartitionRequestTimeoutError(PartitionNotFoundError):
    """The server did not know the partition for the whole partition request timeout (Flink's
    ``PartitionNotFoundException`` after the request back-off is exhausted)."""

    def __init__(self, message: str, partition_id: ResultPartitionID, address: Optional[tuple] = None) -> None:
        super().__init__(partition_id)
        self.args = (message,)
        self.address = address

    def __str__(self) -> str:
        return self.args[0]
