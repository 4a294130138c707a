"""Jobs whose chains hold a fused Map/Filter run (rill.runtime.tasks.fused_chain), in both
execution modes: the records, the task's name and the failing operator's name are those of the
operators one by one."""

from __future__ import annotations

import pytest

from _ds_helpers import collect, run
from rill.common import WatermarkStrategy
from rill.runtime.errors import JobExecutionException


def scale(x):
    return x * 7


def keep(x):
    return x % 3 != 0


def pair(x):
    return (x % 10, x)


def small(p):
    if p[1] == 7 * 2500:
        raise ValueError("no 2500 here")
    return p[0] < 5


def expected(values):
    return [(x * 7 % 10, x * 7) for x in values if (x * 7) % 3 != 0 and x * 7 % 10 < 5]


def test_a_fused_run_emits_the_records_of_its_operators_in_order(env):
    data = list(range(3000))  # three source batches
    ds = env.from_collection(data).map(scale).filter(keep).map(pair).filter(lambda p: p[0] < 5)
    assert collect(ds) == expected(data)


def test_with_timestamps_the_same_records(env):
    data = list(range(3000))
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, ts: v)
    ds = env.from_collection(data).assign_timestamps_and_watermarks(strategy) \
        .map(scale).filter(keep).map(pair).filter(lambda p: p[0] < 5)
    assert collect(ds) == expected(data)


def test_a_failing_filter_in_a_fused_run_names_it_and_the_unchanged_task(env):
    env.from_collection(list(range(3000))).map(scale).name("Scale").filter(keep).map(pair) \
        .filter(small).name("Small").add_sink(lambda v: None)
    with pytest.raises(JobExecutionException) as info:
        run(env)
    message = str(info.value)
    assert "operator 'Small'" in message, message
    assert "task 'Source: Collection Source -> Scale -> Filter -> Map -> Small -> Sink: Unnamed (1/1)'" in message
    assert type(info.value.__cause__) is ValueError
    assert str(info.value.__cause__) == "no 2500 here"
