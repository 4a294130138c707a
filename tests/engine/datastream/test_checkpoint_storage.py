"""Checkpoint storages and state backends (PyFlink's ``pyflink.datastream.checkpoint_storage``
and ``state_backend``): the storage set on a job decides where its checkpoints go (the
JobManager's memory or ``<dir>/<job id>/chk-<n>``), in both execution modes; a backend is its
``state.backend.type``, and one Rill does not have fails the job at submission."""

from __future__ import annotations

import time

import pytest

from rill.common import Configuration
from rill.common.functions import KeyedProcessFunction, MapFunction
from rill.datastream import (
    CheckpointStorage,
    CustomCheckpointStorage,
    CustomStateBackend,
    ExternalizedCheckpointRetention,
    FileSystemCheckpointStorage,
    HashMapStateBackend,
    JobManagerCheckpointStorage,
    StateBackend,
    StreamExecutionEnvironment,
)
from rill.runtime.checkpoint.checkpoint_stats import CheckpointStatsStatus
from rill.state import ValueStateDescriptor

RESULT_TIMEOUT_S = 120


class Slow(MapFunction):
    def map(self, value):
        time.sleep(0.002)
        return value


class Count(KeyedProcessFunction):
    def open(self, ctx):
        self.count = ctx.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        return iter(())


def run_checkpointed_job(env, name):
    conf = env.get_configuration()
    conf.set_integer("rill.source.batch-size", 10)
    conf.set_integer("taskmanager.network.records-per-buffer", 10)
    env.enable_checkpointing(50)
    # a finished job keeps its checkpoints only when they are retained
    env.get_checkpoint_config().set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    (env.from_collection(list(range(400))).map(Slow()).key_by(lambda i: i % 5).process(Count())
        .add_sink(lambda v: None))
    client = env.execute_async(name)
    client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    stats = client.get_checkpoint_stats()
    completed = [c for c in stats.history if c.status is CheckpointStatsStatus.COMPLETED]
    assert completed, "the job completed no checkpoint"
    return client, completed


def test_file_system_storage_writes_the_checkpoints_under_its_path(env, tmp_path):
    directory = tmp_path / "checkpoints"
    env.get_checkpoint_config().set_checkpoint_storage(FileSystemCheckpointStorage(str(directory)))
    client, completed = run_checkpointed_job(env, "file system storage")
    job_dir = directory / client.get_job_id()
    latest = completed[0]
    assert latest.external_path.rstrip("/") == str(job_dir / f"chk-{latest.checkpoint_id}")
    assert (job_dir / f"chk-{latest.checkpoint_id}" / "_metadata").is_file()


def test_the_storage_keys_alone_choose_the_file_system(env, tmp_path):
    # PyFlink 2.x's way: the keys in the Configuration
    directory = tmp_path / "by-keys"
    conf = Configuration()
    conf.set_string("execution.checkpointing.storage", "filesystem")
    conf.set_string("execution.checkpointing.dir", f"file://{directory}")
    env.configure(conf)
    client, completed = run_checkpointed_job(env, "storage by keys")
    assert (directory / client.get_job_id() / f"chk-{completed[0].checkpoint_id}" / "_metadata").is_file()


def test_job_manager_storage_keeps_checkpoints_in_memory_despite_a_configured_directory(env, tmp_path):
    directory = tmp_path / "unused"
    env.get_configuration().set_string("execution.checkpointing.dir", str(directory))
    env.get_checkpoint_config().set_checkpoint_storage(JobManagerCheckpointStorage())
    client, completed = run_checkpointed_job(env, "job manager storage")
    assert [c.external_path for c in completed] == [None] * len(completed)
    assert not directory.exists()


def test_the_hash_map_backend_runs_a_checkpointed_keyed_job(env, tmp_path):
    assert env.set_state_backend(HashMapStateBackend()) is env
    assert env.get_configuration().get_string("state.backend.type", None) == "hashmap"
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path))
    client, completed = run_checkpointed_job(env, "hashmap backend")
    assert (tmp_path / client.get_job_id() / f"chk-{completed[0].checkpoint_id}").is_dir()


def test_a_backend_rill_does_not_have_fails_at_submission():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.get_configuration().set_string("state.backend.type", "forst")
    env.from_collection([1]).print()
    with pytest.raises(NotImplementedError, match=r"'state.backend.type: forst': the ForSt disaggregated state "
                                                  r"backend is not built in Rill"):
        env.execute_async("forst")
    with pytest.raises(NotImplementedError, match="ForSt"):
        env.get_state_backend()
    env.get_configuration().set_string("state.backend.type", "heap")
    with pytest.raises(ValueError, match=r"Invalid value 'heap' for 'state.backend.type': unknown state backend"):
        env.get_state_backend()


def test_state_backends_are_their_keys():
    env = StreamExecutionEnvironment.get_execution_environment()
    assert env.get_state_backend() == HashMapStateBackend()
    assert CustomStateBackend("hashmap") == CustomStateBackend({"state.backend.type": "HashMap"})
    assert CustomStateBackend("hashmap").to_configuration().to_dict() == {"state.backend.type": "hashmap"}
    assert isinstance(HashMapStateBackend(), StateBackend)
    with pytest.raises(NotImplementedError, match="ForSt"):
        CustomStateBackend("forst")
    with pytest.raises(TypeError, match=r"CustomStateBackend expects a state backend name"):
        CustomStateBackend(42)
    with pytest.raises(TypeError, match=r"set_state_backend needs a StateBackend, got 'hashmap'"):
        env.set_state_backend("hashmap")


def test_storages_getters_and_defaults_follow_pyflink():
    fs = FileSystemCheckpointStorage("s3://bucket/ckpts", 1024, 8192)
    assert (fs.get_checkpoint_path(), fs.get_min_file_size_threshold(), fs.get_write_buffer_size(),
            fs.get_savepoint_path()) == ("s3://bucket/ckpts", 1024, 8192, None)
    default = FileSystemCheckpointStorage("/ckpts")
    assert (default.get_min_file_size_threshold(), default.get_write_buffer_size()) == (20 * 1024, 4096)
    jm = JobManagerCheckpointStorage()
    assert (jm.get_max_state_size(), jm.get_checkpoint_path()) == (5 * 1024 * 1024, None)
    assert JobManagerCheckpointStorage(max_state_size=10).get_max_state_size() == 10
    config = StreamExecutionEnvironment.get_execution_environment().get_checkpoint_config()
    assert config.get_checkpoint_storage() == JobManagerCheckpointStorage()
    config.set_checkpoint_storage(FileSystemCheckpointStorage("/ckpts"))
    assert config.get_checkpoint_storage() == FileSystemCheckpointStorage("/ckpts")
    custom = CustomCheckpointStorage({"execution.checkpointing.storage": "filesystem",
                                      "execution.checkpointing.dir": "/other"})
    assert CheckpointStorage.from_configuration(custom.to_configuration()) == FileSystemCheckpointStorage("/other")


def test_bad_storages_are_refused_naming_the_rule():
    with pytest.raises(ValueError, match=r"FileSystemCheckpointStorage: checkpoint_path must not be None or empty"):
        FileSystemCheckpointStorage()
    with pytest.raises(ValueError, match=r"file_state_size_threshold must be -1 \(the default\) or an int of bytes "
                                         r">= 0 and at most 1048576, got 2000000"):
        FileSystemCheckpointStorage("/c", 2_000_000)
    with pytest.raises(NotImplementedError, match=r"JobManagerCheckpointStorage\(checkpoint_path='/m'\): checkpoint "
                                                  r"metadata in a directory with the state in memory is not built"):
        JobManagerCheckpointStorage("/m")
    with pytest.raises(ValueError, match=r"checkpoint storage 'filesystem' needs a directory in "
                                         r"'execution.checkpointing.dir'"):
        CustomCheckpointStorage({"execution.checkpointing.storage": "filesystem"})
    with pytest.raises(ValueError, match=r"Invalid value 'rocks' for 'execution.checkpointing.storage': unknown "
                                         r"checkpoint storage; accepted: 'jobmanager', 'filesystem'"):
        CustomCheckpointStorage({"state.checkpoint-storage": "rocks"})


def test_a_file_system_storage_without_a_directory_fails_at_submission():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.get_configuration().set_string("execution.checkpointing.storage", "filesystem")
    env.from_collection([1]).print()
    with pytest.raises(ValueError, match=r"'execution.checkpointing.storage': checkpoint storage 'filesystem' needs"):
        env.execute_async("no directory")
