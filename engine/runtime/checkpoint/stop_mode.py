"""How a job stops after a synchronous savepoint (Flink's ``StopMode`` of ``EndOfData`` and the
``SavepointType.suspend`` / ``terminate`` of stop-with-savepoint, FLIP-34)."""

from __future__ import annotations

import enum

__all__ = ["StopMode"]


class StopMode(enum.Enum):
    """``DRAIN``: the sources emit ``MAX_WATERMARK`` before the savepoint's barrier, so that
    every event-time timer and window fires, and every operator ends its input and finishes
    after the savepoint (``flink stop --drain``; Flink's ``SavepointType.terminate``).

    ``NO_DRAIN``: no ``MAX_WATERMARK``; after the savepoint completed the tasks end without
    ``end_input``/``finish``, so the savepoint can be resumed as if the job had never stopped
    (``flink stop``; Flink's ``SavepointType.suspend``).
    """

    DRAIN = "DRAIN"
    NO_DRAIN = "NO_DRAIN"
