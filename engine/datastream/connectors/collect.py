"""``CollectSink``: gathers a stream's records for the submitting program."""

from __future__ import annotations

from typing import Any, List

from rill.operators.collect_sink import register_channel, release_channel

__all__ = ["CollectSink"]


class CollectSink:
    """A sink whose records the program reads after (or while) the job runs.

    ``ds.sink_to(sink)``; after ``env.execute()``, ``sink.get_results()`` returns every record
    received, in arrival order (per subtask in order; interleaving across subtasks is
    arbitrary). Works in both modes: on a cluster the sink subtasks send their records back to
    this process (as ``execute_and_collect`` does), and the job's result arrives only after
    every one of them has ended, so ``get_results()`` after ``execute()`` is complete.
    """

    def __init__(self):
        self._channel = register_channel()
        self._results: List[Any] = []

    @property
    def channel_id(self) -> str:
        return self._channel.channel_id

    def get_results(self) -> List[Any]:
        self._results.extend(self._channel.drain())
        return list(self._results)

    def close(self) -> None:
        release_channel(self._channel.channel_id)
