"""The benchmark workloads, by name."""

from bench.workloads.stateless import StatelessWorkload
from bench.workloads.windows import SlidingWindowsWorkload, TumblingWindowsWorkload
from bench.workloads.wordcount import WordCountSumWorkload, WordCountWorkload

WORKLOADS = {w.name: w for w in (StatelessWorkload, WordCountWorkload, WordCountSumWorkload,
                                 TumblingWindowsWorkload, SlidingWindowsWorkload)}

__all__ = ["WORKLOADS", "StatelessWorkload", "WordCountWorkload", "WordCountSumWorkload", "TumblingWindowsWorkload",
           "SlidingWindowsWorkload"]
