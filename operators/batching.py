"""``ChunkingOperator``: groups the records of each input batch into lists of at most
``batch_size`` records, for sinks that write per batch (``AsyncDataStream.add_batch_sink``).

A chunk never spans two input batches (one network buffer, or one source batch, per mailbox
action): records are never held back waiting for more, so the operator needs no timer, holds
nothing between calls (nothing to snapshot), and a watermark cannot overtake a buffered record.
A record's latency is therefore the upstream buffer timeout's (``execution.buffer-timeout``,
100 ms by default), as for any other operator. Not in Flink (its ``AsyncSinkBase`` buffers
across calls with a time-based flush); Rill's input batches already are the batches.

A chunk carries the timestamp of its last record (``None`` when records have none).
"""

from __future__ import annotations

from typing import Any, List, Optional

from rill.operators.base import AbstractStreamOperator

__all__ = ["ChunkingOperator"]


class ChunkingOperator(AbstractStreamOperator):
    """Emits ``values[i:i + batch_size]`` lists for every input batch.

    :param batch_size: most records per emitted list (a positive int).
    :raises ValueError: if ``batch_size`` is not a positive int.
    """

    default_name = "Chunk"

    def __init__(self, batch_size: int) -> None:
        super().__init__()
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"ChunkingOperator: batch_size must be a positive int, got {batch_size!r}")
        self.batch_size = batch_size

    def process_element(self, value: Any, timestamp: Optional[int] = None) -> None:
        self.output.collect([value], timestamp)

    def process_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        n = self.batch_size
        chunks = [values[i:i + n] for i in range(0, len(values), n)]
        if timestamps is None:
            self.output.collect_batch(chunks, None)
        else:
            self.output.collect_batch(chunks, [timestamps[min(i + n, len(values)) - 1]
                                               for i in range(0, len(values), n)])
