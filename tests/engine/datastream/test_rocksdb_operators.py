"""The keyed operators on the RocksDB state backend (issue 16): the DataStream programs of
``test_batch_mode`` (reduce and built-in aggregations, keyed process functions with timers,
tumbling, sliding, session and count windows, keyed connect, interval join, many keys), run
in BATCH and STREAMING on ``state.backend.type: rocksdb`` in both execution modes, give the
same exact outputs as on the heap backend. Operators whose heap fast paths write the heap
backend's tables take their per-record state path on RocksDB; BATCH drops a finished key's
state through the backend's prefix delete."""

from __future__ import annotations

import pytest

import test_batch_mode as programs
from _ds_helpers import wait_until
from rill.datastream import EmbeddedRocksDBStateBackend

PROGRAMS = [
    "test_word_count_emits_one_final_count_per_word",
    "test_sum_and_max_by_per_key",
    "test_keyed_process_function_with_event_time_timers",
    "test_tumbling_windows",
    "test_sliding_windows",
    "test_session_windows",
    "test_count_windows",
    "test_keyed_connect_and_co_process",
    "test_interval_join",
    "test_many_keys_sharing_key_groups",
]


@pytest.mark.parametrize("program", PROGRAMS)
def test_program_gives_the_heap_backends_output_on_rocksdb(env, monkeypatch, tmp_path, program):
    local = tmp_path / "rocksdb"

    def on_rocksdb(e):
        backend = EmbeddedRocksDBStateBackend()
        backend.set_db_storage_paths(str(local))
        return e.set_state_backend(backend)

    new_env = programs.new_env
    monkeypatch.setattr(programs, "new_env", lambda mode=None: on_rocksdb(new_env(mode)))
    getattr(programs, program)(on_rocksdb(env))
    # the program's keyed operators ran on RocksDB (each made a directory, removed at its end)
    assert local.is_dir()
    assert wait_until(lambda: list(local.iterdir()) == [])
