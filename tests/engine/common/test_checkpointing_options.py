"""Checkpointing configuration: Flink 2.x keys and defaults, the ``CheckpointConfig`` view of
the job's ``Configuration``, duration parsing, deprecated keys and error messages."""

from __future__ import annotations

import datetime
import pickle
from importlib import import_module

import pytest

from rill.common.checkpointing_options import (
    CheckpointingMode,
    CheckpointingOptions,
    ExternalizedCheckpointRetention,
)
from rill.common.configuration import Configuration
from rill.common.time import Duration
from rill.common.time_utils import parse_duration
from rill.datastream import CheckpointConfig, StreamExecutionEnvironment
from rill.datastream import CheckpointingMode as ExportedMode
from rill.datastream import ExternalizedCheckpointRetention as ExportedRetention

O = CheckpointingOptions

# (ConfigOption, Flink 2.x key, default, CheckpointingOptions field, field default,
#  CheckpointConfig getter, getter default)
DEFAULTS = [
    (O.CHECKPOINTING_INTERVAL, "execution.checkpointing.interval", None,
     "interval_ms", None, "get_checkpoint_interval", -1),
    (O.CHECKPOINTING_CONSISTENCY_MODE, "execution.checkpointing.mode", CheckpointingMode.EXACTLY_ONCE,
     "mode", CheckpointingMode.EXACTLY_ONCE, "get_checkpointing_mode", CheckpointingMode.EXACTLY_ONCE),
    (O.CHECKPOINTING_TIMEOUT, "execution.checkpointing.timeout", 600_000,
     "timeout_ms", 600_000, "get_checkpoint_timeout", 600_000),
    (O.MIN_PAUSE_BETWEEN_CHECKPOINTS, "execution.checkpointing.min-pause", 0,
     "min_pause_ms", 0, "get_min_pause_between_checkpoints", 0),
    (O.MAX_CONCURRENT_CHECKPOINTS, "execution.checkpointing.max-concurrent-checkpoints", 1,
     "max_concurrent_checkpoints", 1, "get_max_concurrent_checkpoints", 1),
    (O.TOLERABLE_FAILURE_NUMBER, "execution.checkpointing.tolerable-failed-checkpoints", 0,
     "tolerable_failed_checkpoints", 0, "get_tolerable_checkpoint_failure_number", 0),
    (O.EXTERNALIZED_CHECKPOINT_RETENTION, "execution.checkpointing.externalized-checkpoint-retention",
     ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS, "externalized_checkpoint_retention",
     ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS, "get_externalized_checkpoint_retention",
     ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS),
    (O.MAX_RETAINED_CHECKPOINTS, "execution.checkpointing.num-retained", 1, "num_retained", 1, None, None),
    (O.ENABLE_UNALIGNED, "execution.checkpointing.unaligned.enabled", False,
     "unaligned", False, "is_unaligned_checkpoints_enabled", False),
    (O.ALIGNED_CHECKPOINT_TIMEOUT, "execution.checkpointing.aligned-checkpoint-timeout", 0,
     "aligned_checkpoint_timeout_ms", 0, "get_aligned_checkpoint_timeout", Duration.of_millis(0)),
    (O.FORCE_UNALIGNED, "execution.checkpointing.unaligned.forced", False,
     "force_unaligned", False, "is_force_unaligned_checkpoints", False),
    (O.ENABLE_CHECKPOINTS_AFTER_TASKS_FINISH, "execution.checkpointing.checkpoints-after-tasks-finish", True,
     "checkpoints_after_tasks_finish", True, None, None),
    (O.CHECKPOINTS_DIRECTORY, "execution.checkpointing.dir", None, "checkpoint_dir", None, None, None),
    (O.SAVEPOINT_DIRECTORY, "execution.checkpointing.savepoint-dir", None, "savepoint_dir", None, None, None),
]

OPTIONS = {row[1]: row[0] for row in DEFAULTS}


@pytest.mark.parametrize("option,key,default,field,field_default,getter,getter_default", DEFAULTS,
                         ids=[row[1] for row in DEFAULTS])
def test_every_key_and_default(option, key, default, field, field_default, getter, getter_default):
    assert option.key == key
    assert option.default == default
    parsed = O.from_configuration(Configuration())
    assert getattr(parsed, field) == field_default
    assert getattr(O(), field) == field_default  # the dataclass defaults are the options' defaults
    if getter is not None:
        assert getattr(CheckpointConfig(Configuration()), getter)() == getter_default


def test_defaults_disable_checkpointing():
    assert O.from_configuration(Configuration()).enabled is False
    assert CheckpointConfig(Configuration()).is_checkpointing_enabled() is False
    assert CheckpointConfig(Configuration()).is_externalized_checkpoints_enabled() is False
    assert CheckpointConfig(Configuration()).is_fail_on_checkpointing_errors() is True


# (key, value as a user writes it in the config file, field, parsed value)
STRING_VALUES = [
    ("execution.checkpointing.interval", "30 s", "interval_ms", 30_000),
    ("execution.checkpointing.mode", "at_least_once", "mode", CheckpointingMode.AT_LEAST_ONCE),
    ("execution.checkpointing.timeout", "2 min", "timeout_ms", 120_000),
    ("execution.checkpointing.min-pause", "500 ms", "min_pause_ms", 500),
    ("execution.checkpointing.max-concurrent-checkpoints", "3", "max_concurrent_checkpoints", 3),
    ("execution.checkpointing.tolerable-failed-checkpoints", "5", "tolerable_failed_checkpoints", 5),
    ("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION",
     "externalized_checkpoint_retention", ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION),
    ("execution.checkpointing.num-retained", "4", "num_retained", 4),
    ("execution.checkpointing.unaligned.enabled", "TRUE", "unaligned", True),
    ("execution.checkpointing.aligned-checkpoint-timeout", "1 s", "aligned_checkpoint_timeout_ms", 1000),
    ("execution.checkpointing.unaligned.forced", "true", "force_unaligned", True),
    ("execution.checkpointing.checkpoints-after-tasks-finish", "false", "checkpoints_after_tasks_finish", False),
    ("execution.checkpointing.dir", "file:///tmp/ckpt", "checkpoint_dir", "file:///tmp/ckpt"),
    ("execution.checkpointing.savepoint-dir", "/tmp/sp", "savepoint_dir", "/tmp/sp"),
]


@pytest.mark.parametrize("key,text,field,expected", STRING_VALUES, ids=[row[0] for row in STRING_VALUES])
def test_every_key_round_trips_through_configuration(key, text, field, expected):
    conf = Configuration().set_string(key, text)
    assert getattr(O.from_configuration(conf), field) == expected
    # what crosses to a cluster: the Configuration pickled, and its string form reloaded
    assert getattr(O.from_configuration(pickle.loads(pickle.dumps(conf))), field) == expected
    reloaded = Configuration()
    for k, v in conf.to_dict().items():
        reloaded.set_string(k, v)
    assert getattr(O.from_configuration(reloaded), field) == expected


def test_checkpoint_config_setters_write_the_configuration():
    conf = Configuration()
    cc = CheckpointConfig(conf)
    assert (cc.set_checkpoint_interval(5000)
            .set_checkpointing_mode(CheckpointingMode.AT_LEAST_ONCE)
            .set_checkpoint_timeout(60_000)
            .set_min_pause_between_checkpoints(250)
            .set_max_concurrent_checkpoints(2)
            .set_tolerable_checkpoint_failure_number(3)
            .set_externalized_checkpoint_retention(ExternalizedCheckpointRetention.DELETE_ON_CANCELLATION)
            .set_aligned_checkpoint_timeout(Duration.of_seconds(2))
            .set_force_unaligned_checkpoints()) is cc
    assert conf.to_dict() == {
        "execution.checkpointing.interval": "5000",
        "execution.checkpointing.mode": "AT_LEAST_ONCE",
        "execution.checkpointing.timeout": "60000",
        "execution.checkpointing.min-pause": "250",
        "execution.checkpointing.max-concurrent-checkpoints": "2",
        "execution.checkpointing.tolerable-failed-checkpoints": "3",
        "execution.checkpointing.externalized-checkpoint-retention": "DELETE_ON_CANCELLATION",
        "execution.checkpointing.aligned-checkpoint-timeout": "2000",
        "execution.checkpointing.unaligned.forced": "True",
    }
    assert (cc.get_checkpoint_interval(), cc.get_checkpointing_mode(), cc.get_checkpoint_timeout(),
            cc.get_min_pause_between_checkpoints(), cc.get_max_concurrent_checkpoints(),
            cc.get_tolerable_checkpoint_failure_number(), cc.get_externalized_checkpoint_retention(),
            cc.get_aligned_checkpoint_timeout(), cc.is_force_unaligned_checkpoints()) == (
        5000, CheckpointingMode.AT_LEAST_ONCE, 60_000, 250, 2, 3,
        ExternalizedCheckpointRetention.DELETE_ON_CANCELLATION, Duration.of_millis(2000), True)
    assert cc.is_checkpointing_enabled() and cc.is_externalized_checkpoints_enabled()
    assert cc.get_checkpointing_consistency_mode() is CheckpointingMode.AT_LEAST_ONCE
    assert O.from_configuration(conf) == O(
        interval_ms=5000, mode=CheckpointingMode.AT_LEAST_ONCE, timeout_ms=60_000, min_pause_ms=250,
        max_concurrent_checkpoints=2, tolerable_failed_checkpoints=3,
        externalized_checkpoint_retention=ExternalizedCheckpointRetention.DELETE_ON_CANCELLATION,
        aligned_checkpoint_timeout_ms=2000, force_unaligned=True)


def test_checkpoint_config_reads_what_the_configuration_says():
    conf = Configuration().set_string("execution.checkpointing.interval", "1 min")
    conf.set_string("execution.checkpointing.aligned-checkpoint-timeout", "30 s")
    cc = CheckpointConfig(conf)
    assert cc.get_checkpoint_interval() == 60_000
    assert cc.get_aligned_checkpoint_timeout() == Duration.of_seconds(30)
    assert cc.get_alignment_timeout() == Duration.of_seconds(30)


def test_unaligned_toggles_and_consistency_mode_aliases():
    cc = CheckpointConfig(Configuration())
    assert cc.enable_unaligned_checkpoints().is_unaligned_checkpoints_enabled() is True
    assert cc.disable_unaligned_checkpoints().is_unaligned_checkpoints_enabled() is False
    cc.set_checkpointing_consistency_mode(CheckpointingMode.AT_LEAST_ONCE)
    assert cc.get_checkpointing_mode() is CheckpointingMode.AT_LEAST_ONCE
    cc.set_alignment_timeout(datetime.timedelta(seconds=3))
    assert cc.get_aligned_checkpoint_timeout() == Duration.of_seconds(3)


def test_unaligned_is_off_in_at_least_once_mode():
    conf = Configuration().set_string("execution.checkpointing.unaligned.enabled", "true")
    conf.set_string("execution.checkpointing.mode", "AT_LEAST_ONCE")
    assert O.from_configuration(conf).unaligned is False
    assert CheckpointConfig(conf).is_unaligned_checkpoints_enabled() is True  # the key as set


def test_fail_on_checkpointing_errors_maps_to_tolerable_failures():
    cc = CheckpointConfig(Configuration())
    assert cc.set_fail_on_checkpointing_errors(False).get_tolerable_checkpoint_failure_number() == 2147483647
    assert cc.is_fail_on_checkpointing_errors() is False
    assert cc.set_fail_on_checkpointing_errors(True).get_tolerable_checkpoint_failure_number() == 0


@pytest.mark.parametrize("text,ms", [
    ("500", 500), ("500 ms", 500), ("500ms", 500), ("1 s", 1000), ("1s", 1000), ("2 sec", 2000),
    ("10 min", 600_000), ("3 m", 180_000), ("1 h", 3_600_000), ("2 hours", 7_200_000), ("1 d", 86_400_000),
    ("5 SECONDS", 5000), ("  7 millis  ", 7), ("2000 us", 2), ("3000000 ns", 3), ("0", 0),
])
def test_duration_parsing(text, ms):
    assert parse_duration(text) == ms


@pytest.mark.parametrize("text,message", [
    ("", "a duration must not be empty"),
    ("ten s", "duration 'ten s' does not start with a whole number"),
    ("-5 s", "duration '-5 s' does not start with a whole number"),
    ("1.5 s", "duration '1.5 s' has unknown unit '.5 s'"),
    ("5 weeks", "duration '5 weeks' has unknown unit 'weeks'"),
    ("1500 us", "duration '1500 us' is not a whole number of milliseconds"),
])
def test_duration_parsing_errors(text, message):
    with pytest.raises(ValueError) as e:
        parse_duration(text)
    assert str(e.value).startswith(message)


def test_durations_accept_ints_timedeltas_and_durations():
    for value in (90_000, datetime.timedelta(seconds=90), Duration.of_seconds(90), "90 s", "90000"):
        conf = Configuration().set(O.CHECKPOINTING_TIMEOUT, value)
        assert O.from_configuration(conf).timeout_ms == 90_000


@pytest.mark.parametrize("old_key,value,field,expected", [
    ("state.checkpoints.dir", "/data/ckpt", "checkpoint_dir", "/data/ckpt"),
    ("state.backend.fs.checkpointdir", "/data/ckpt2", "checkpoint_dir", "/data/ckpt2"),
    ("state.savepoints.dir", "/data/sp", "savepoint_dir", "/data/sp"),
    ("savepoints.state.backend.fs.dir", "/data/sp2", "savepoint_dir", "/data/sp2"),
    ("state.checkpoints.num-retained", "3", "num_retained", 3),
    ("execution.checkpointing.unaligned", "true", "unaligned", True),
    ("execution.checkpointing.alignment-timeout", "5 s", "aligned_checkpoint_timeout_ms", 5000),
    ("execution.checkpointing.checkpoints-after-tasks-finish.enabled", "false",
     "checkpoints_after_tasks_finish", False),
])
def test_deprecated_keys(old_key, value, field, expected):
    assert getattr(O.from_configuration(Configuration().set_string(old_key, value)), field) == expected


def test_the_new_key_wins_over_a_deprecated_one():
    conf = Configuration().set_string("state.checkpoints.dir", "/old").set_string("execution.checkpointing.dir", "/new")
    assert O.from_configuration(conf).checkpoint_dir == "/new"


def test_interval_zero_disables():
    parsed = O.from_configuration(Configuration().set_string("execution.checkpointing.interval", "0"))
    assert (parsed.interval_ms, parsed.enabled) == (None, False)


@pytest.mark.parametrize("key,value,message", [
    ("execution.checkpointing.interval", "5 ms",
     "Invalid value for 'execution.checkpointing.interval': Checkpoint interval must be larger than or equal "
     "to 10 ms, got 5 ms"),
    ("execution.checkpointing.interval", -1,
     "Invalid value for 'execution.checkpointing.interval': Checkpoint interval must be larger than or equal "
     "to 10 ms, got -1 ms"),
    ("execution.checkpointing.interval", "soon",
     "Invalid value 'soon' for 'execution.checkpointing.interval': duration 'soon' does not start with a "
     "whole number"),
    ("execution.checkpointing.timeout", "9 ms",
     "Invalid value for 'execution.checkpointing.timeout': Checkpoint timeout must be larger than or equal "
     "to 10 ms, got 9 ms"),
    ("execution.checkpointing.min-pause", -3,
     "Invalid value for 'execution.checkpointing.min-pause': Pause value must be zero or positive, got -3 ms"),
    ("execution.checkpointing.max-concurrent-checkpoints", "0",
     "Invalid value for 'execution.checkpointing.max-concurrent-checkpoints': The maximum number of "
     "concurrent attempts must be at least one, got 0"),
    ("execution.checkpointing.max-concurrent-checkpoints", "two",
     "Invalid value 'two' for 'execution.checkpointing.max-concurrent-checkpoints': expected an integer"),
    ("execution.checkpointing.tolerable-failed-checkpoints", -1,
     "Invalid value for 'execution.checkpointing.tolerable-failed-checkpoints': The tolerable failure "
     "checkpoint number must be non-negative, got -1"),
    ("execution.checkpointing.num-retained", "0",
     "Invalid value for 'execution.checkpointing.num-retained': at least one completed checkpoint must be "
     "retained, got 0"),
    ("execution.checkpointing.mode", "EXACTLY_TWICE",
     "Invalid value 'EXACTLY_TWICE' for 'execution.checkpointing.mode': expected one of EXACTLY_ONCE, "
     "AT_LEAST_ONCE"),
    ("execution.checkpointing.externalized-checkpoint-retention", "KEEP",
     "Invalid value 'KEEP' for 'execution.checkpointing.externalized-checkpoint-retention': expected one of "
     "DELETE_ON_CANCELLATION, RETAIN_ON_CANCELLATION, NO_EXTERNALIZED_CHECKPOINTS"),
    ("execution.checkpointing.unaligned.enabled", "yes",
     "Invalid value 'yes' for 'execution.checkpointing.unaligned.enabled': expected true or false"),
    ("execution.checkpointing.aligned-checkpoint-timeout", -1,
     "Invalid value for 'execution.checkpointing.aligned-checkpoint-timeout': the aligned checkpoint "
     "timeout must be zero or positive, got -1 ms"),
])
def test_invalid_values_name_key_value_and_rule(key, value, message):
    conf = Configuration().set(OPTIONS[key], value)  # as a program's Configuration or the config file holds it
    with pytest.raises(ValueError) as e:
        O.from_configuration(conf)
    assert str(e.value) == message


def test_unaligned_refuses_concurrent_checkpoints():
    conf = Configuration().set_string("execution.checkpointing.unaligned.enabled", "true")
    conf.set_integer("execution.checkpointing.max-concurrent-checkpoints", 2)
    with pytest.raises(ValueError) as e:
        O.from_configuration(conf)
    assert str(e.value) == ("Invalid value for 'execution.checkpointing.max-concurrent-checkpoints': unaligned "
                            "checkpoints ('execution.checkpointing.unaligned.enabled') allow at most one "
                            "concurrent checkpoint, got 2")


@pytest.mark.parametrize("call,error,message", [
    (lambda cc: cc.set_checkpoint_interval(9), ValueError,
     "Checkpoint interval must be larger than or equal to 10 ms, got 9 ms"),
    (lambda cc: cc.set_checkpoint_timeout(0), ValueError,
     "Checkpoint timeout must be larger than or equal to 10 ms, got 0 ms"),
    (lambda cc: cc.set_min_pause_between_checkpoints(-1), ValueError,
     "Pause value must be zero or positive, got -1 ms"),
    (lambda cc: cc.set_max_concurrent_checkpoints(0), ValueError,
     "The maximum number of concurrent attempts must be at least one, got 0"),
    (lambda cc: cc.set_tolerable_checkpoint_failure_number(-2), ValueError,
     "The tolerable failure checkpoint number must be non-negative, got -2"),
    (lambda cc: cc.set_aligned_checkpoint_timeout(Duration.of_millis(-1)), ValueError,
     "The aligned checkpoint timeout must be zero or positive, got -1 ms"),
    (lambda cc: cc.set_checkpoint_interval("1 s"), TypeError,
     "CheckpointConfig.set_checkpoint_interval needs an int, got '1 s' (str)"),
    (lambda cc: cc.set_checkpointing_mode("EXACTLY_ONCE"), TypeError,
     "CheckpointConfig.set_checkpointing_mode needs a CheckpointingMode, got 'EXACTLY_ONCE'"),
    (lambda cc: cc.set_externalized_checkpoint_retention(1), TypeError,
     "CheckpointConfig.set_externalized_checkpoint_retention needs an ExternalizedCheckpointRetention, got 1"),
])
def test_setter_errors(call, error, message):
    conf = Configuration()
    with pytest.raises(error) as e:
        call(CheckpointConfig(conf))
    assert str(e.value) == message
    assert conf.to_dict() == {}  # nothing written


def test_environment_enable_checkpointing_writes_the_job_configuration():
    env = StreamExecutionEnvironment.get_execution_environment()
    assert env.get_checkpoint_config().is_checkpointing_enabled() is False
    assert (env.get_checkpoint_interval(), env.get_checkpointing_mode()) == (-1, CheckpointingMode.EXACTLY_ONCE)
    assert env.enable_checkpointing(1000) is env
    assert env.get_configuration().get_string("execution.checkpointing.interval") == "1000"
    assert env.get_checkpoint_config().get_checkpointing_mode() is CheckpointingMode.EXACTLY_ONCE
    env.enable_checkpointing(2000, CheckpointingMode.AT_LEAST_ONCE)
    assert (env.get_checkpoint_interval(), env.get_checkpointing_mode()) == (2000, CheckpointingMode.AT_LEAST_ONCE)
    cc = env.get_checkpoint_config()
    assert (cc.get_checkpoint_interval(), cc.get_checkpointing_mode()) == (2000, CheckpointingMode.AT_LEAST_ONCE)
    with pytest.raises(ValueError, match="Checkpoint interval must be larger than or equal to 10 ms"):
        env.enable_checkpointing(5)


def test_environment_configuration_reaches_the_checkpoint_config():
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration().set_string("execution.checkpointing.interval", "10 s"))
    assert env.get_checkpoint_config().get_checkpoint_interval() == 10_000


def test_pyflink_names_are_exported():
    assert ExportedMode is CheckpointingMode and ExportedRetention is ExternalizedCheckpointRetention
    # PyFlink 2.x's module paths, for programs that import from them
    assert import_module("rill.datastream.checkpointing_mode").CheckpointingMode is CheckpointingMode
    assert import_module("rill.datastream.externalized_checkpoint_retention").ExternalizedCheckpointRetention \
        is ExternalizedCheckpointRetention
    assert import_module("rill.datastream.checkpoint_config").CheckpointConfig is CheckpointConfig
    assert [m.name for m in CheckpointingMode] == ["EXACTLY_ONCE", "AT_LEAST_ONCE"]
    assert [m.name for m in ExternalizedCheckpointRetention] == [
        "DELETE_ON_CANCELLATION", "RETAIN_ON_CANCELLATION", "NO_EXTERNALIZED_CHECKPOINTS"]


def test_environment_variables_set_checkpointing_and_restart_keys(monkeypatch):
    monkeypatch.setenv("RILL_EXECUTION_CHECKPOINTING_INTERVAL", "5 s")
    monkeypatch.setenv("RILL_RESTART_STRATEGY_TYPE", "fixed-delay")
    conf = StreamExecutionEnvironment.get_execution_environment().get_configuration()
    assert CheckpointConfig(conf).get_checkpoint_interval() == 5000
    assert conf.get_string("restart-strategy.type") == "fixed-delay"
