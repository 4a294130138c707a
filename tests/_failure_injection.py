"""Failure injection shared by the failover and restart-strategy tests: a map that fails at a
given record a given number of times (marker files count the failures across attempts and
processes), and a sink that writes one file per attempt and subtask."""

from __future__ import annotations

import os
from pathlib import Path

from rill.common.functions import MapFunction, SinkFunction


class FailAt(MapFunction):
    """Raises at record ``at`` while fewer than ``times`` marker files exist in ``marker_dir``
    (each failure leaves one), so attempt ``times`` runs through."""

    def __init__(self, marker_dir: str, at: int, times: int):
        self.marker_dir, self.at, self.times = marker_dir, at, times

    def map(self, value):
        if value == self.at:
            done = len(os.listdir(self.marker_dir))
            if done < self.times:
                Path(self.marker_dir, f"failed-{done}").touch()
                raise RuntimeError(f"injected failure {done + 1} at record {value}")
        return value


class FilePerAttempt(SinkFunction):
    """Appends each record to ``<dir>/attempt-<a>-subtask-<i>.txt``, flushed per record."""

    def __init__(self, out_dir: str):
        self.out_dir = out_dir

    def open(self, runtime_context):
        name = (f"attempt-{runtime_context.get_attempt_number()}-"
                f"subtask-{runtime_context.get_index_of_this_subtask()}.txt")
        self.file = open(os.path.join(self.out_dir, name), "a", buffering=1)

    def invoke(self, value, context):
        self.file.write(f"{value}\n")

    def close(self):
        self.file.close()
