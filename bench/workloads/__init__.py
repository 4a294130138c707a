"""The benchmark workloads, by name."""

from bench.workloads.stateless import StatelessWorkload
from bench.workloads.wordcount import WordCountWorkload

WORKLOADS = {w.name: w for w in (StatelessWorkload, WordCountWorkload)}

__all__ = ["WORKLOADS", "StatelessWorkload", "WordCountWorkload"]
