"""``RestartStrategies`` (PyFlink's ``pyflink.common.restart_strategy``): each configuration is
the ``restart-strategy.*`` keys, and ``env.set_restart_strategy`` makes a failing job restart
(or not) accordingly, in both execution modes."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest

from rill.common import JobStatus, RestartStrategies, RestartStrategyConfiguration
from rill.datastream import StreamExecutionEnvironment
from rill.runtime.errors import JobExecutionException

from _failure_injection import FailAt, FilePerAttempt

N = 100
TIMEOUT_S = 120


def run(env, tmp_path, strategy, times):
    markers, out = tmp_path / "markers", tmp_path / "out"
    markers.mkdir()
    out.mkdir()
    assert env.set_restart_strategy(strategy) is env
    env.set_parallelism(2)
    env.from_collection(list(range(N))).map(FailAt(str(markers), N // 2, times)).add_sink(FilePerAttempt(str(out)))
    client = env.execute_async("restart strategy")
    return client, markers, out


def attempt_output(out: Path, attempt: int):
    return sorted(int(v) for f in out.glob(f"attempt-{attempt}-*") for v in f.read_text().split())


def test_fixed_delay_restart_restarts_the_failing_job(env, tmp_path):
    client, markers, out = run(env, tmp_path, RestartStrategies.fixed_delay_restart(2, timedelta(milliseconds=10)), 2)
    client.get_job_execution_result().result(timeout=TIMEOUT_S)
    assert client.get_job_status() is JobStatus.FINISHED
    assert len(os.listdir(markers)) == 2
    assert attempt_output(out, 2) == list(range(N))


def test_fixed_delay_restart_fails_once_its_attempts_are_used_up(env, tmp_path):
    client, markers, _ = run(env, tmp_path, RestartStrategies.fixed_delay_restart(1, 0), 5)
    with pytest.raises(JobExecutionException) as e:
        client.get_job_execution_result().result(timeout=TIMEOUT_S)
    assert str(e.value.__cause__) == f"injected failure 2 at record {N // 2}"


def test_failure_rate_restart_restarts_the_failing_job(env, tmp_path):
    client, markers, out = run(env, tmp_path, RestartStrategies.failure_rate_restart(3, 60_000, 0), 1)
    client.get_job_execution_result().result(timeout=TIMEOUT_S)
    assert attempt_output(out, 1) == list(range(N))


def test_exponential_delay_restart_restarts_the_failing_job(env, tmp_path):
    strategy = RestartStrategies.exponential_delay_restart(10, 100, 2.0, timedelta(hours=1), 0.0)
    client, markers, out = run(env, tmp_path, strategy, 2)
    client.get_job_execution_result().result(timeout=TIMEOUT_S)
    assert len(os.listdir(markers)) == 2
    assert attempt_output(out, 2) == list(range(N))


def test_no_restart_fails_on_the_first_failure_even_with_checkpointing(env, tmp_path):
    env.enable_checkpointing(60_000)  # unset, checkpointing would mean exponential-delay restarts
    client, markers, _ = run(env, tmp_path, RestartStrategies.no_restart(), 1)
    with pytest.raises(JobExecutionException) as e:
        client.get_job_execution_result().result(timeout=TIMEOUT_S)
    assert str(e.value.__cause__) == f"injected failure 1 at record {N // 2}"
    assert client.get_job_status() is JobStatus.FAILED


def test_each_configuration_is_its_restart_strategy_keys():
    def keys(c):
        return c.to_configuration().to_dict()

    assert keys(RestartStrategies.no_restart()) == {"restart-strategy.type": "none"}
    assert keys(RestartStrategies.fixed_delay_restart(3, timedelta(seconds=2))) == {
        "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3",
        "restart-strategy.fixed-delay.delay": "2000"}
    assert keys(RestartStrategies.failure_rate_restart(4, timedelta(minutes=1), 500)) == {
        "restart-strategy.type": "failure-rate", "restart-strategy.failure-rate.max-failures-per-interval": "4",
        "restart-strategy.failure-rate.failure-rate-interval": "60000", "restart-strategy.failure-rate.delay": "500"}
    assert keys(RestartStrategies.exponential_delay_restart(10, 100, 2, 5000, 0.5)) == {
        "restart-strategy.type": "exponential-delay", "restart-strategy.exponential-delay.initial-backoff": "10",
        "restart-strategy.exponential-delay.max-backoff": "100",
        "restart-strategy.exponential-delay.backoff-multiplier": "2.0",
        "restart-strategy.exponential-delay.reset-backoff-threshold": "5000",
        "restart-strategy.exponential-delay.jitter-factor": "0.5"}
    assert keys(RestartStrategies.fall_back_restart()) == {}
    fixed = RestartStrategies.fixed_delay_restart(3, 2000)
    assert fixed == RestartStrategies.fixed_delay_restart(3, timedelta(seconds=2))
    assert isinstance(fixed, RestartStrategyConfiguration)
    assert (fixed.get_restart_attempts(), fixed.get_delay_between_attempts_interval()) == (3, timedelta(seconds=2))
    assert fixed.get_description() == "Restart with fixed delay (2000 ms). #3 restart attempts."


def test_fall_back_restart_keeps_the_configured_strategy():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.get_configuration().set_string("restart-strategy.type", "fixed-delay")
    env.set_restart_strategy(RestartStrategies.fall_back_restart())
    assert env.get_configuration().get_string("restart-strategy.type", None) == "fixed-delay"


def test_bad_arguments_name_the_parameter():
    with pytest.raises(TypeError, match=r"fixed_delay_restart: the parameter 'delay_between_attempts' only "
                                        r"supports integer \(ms\) and datetime.timedelta, got str '1 s'"):
        RestartStrategies.fixed_delay_restart(1, "1 s")
    with pytest.raises(ValueError, match=r"failure_rate_restart: 'failure_rate' must be an int >= 0, got -1"):
        RestartStrategies.failure_rate_restart(-1, 10, 10)
    with pytest.raises(ValueError, match=r"'jitter_factor' must be a number in \[0, 1\], got 2"):
        RestartStrategies.exponential_delay_restart(10, 100, 2, 5000, 2)
    with pytest.raises(TypeError, match=r"set_restart_strategy expects a RestartStrategyConfiguration"):
        StreamExecutionEnvironment.get_execution_environment().set_restart_strategy("fixed-delay")
