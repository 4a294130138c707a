"""``Throttle``: a pass-through map that holds its subtask to a record rate (the examples'
``--max-records-per-second``, for demos and tests that stop or fail a job halfway)."""

from __future__ import annotations

import time
from typing import Any, Optional

from rill.datastream import MapFunction, RuntimeContext

__all__ = ["Throttle", "throttled"]

#: records between two rate checks (the sleep is amortized over them)
_CHECK_EVERY = 50


class Throttle(MapFunction):
    """Passes every record on, sleeping so that its subtask emits at most
    ``records_per_second`` records per second on average.

    :raises ValueError: if ``records_per_second`` is not positive.
    """

    def __init__(self, records_per_second: float):
        if not records_per_second > 0:
            raise ValueError(f"Throttle: records_per_second must be > 0, got {records_per_second!r}")
        self.records_per_second = float(records_per_second)

    def open(self, runtime_context: RuntimeContext) -> None:
        self._start = time.monotonic()
        self._n = 0

    def map(self, value: Any) -> Any:
        self._n += 1
        if self._n % _CHECK_EVERY == 0:
            ahead = self._start + self._n / self.records_per_second - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        return value


def throttled(stream, max_records_per_second: Optional[float]):
    """``stream`` itself, or followed by a :class:`Throttle` named ``Throttle`` (chained with
    its source) when ``max_records_per_second`` is given."""
    if max_records_per_second is None:
        return stream
    return stream.map(Throttle(max_records_per_second)).name("Throttle")
