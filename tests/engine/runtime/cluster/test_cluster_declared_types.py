"""Declared types in cluster mode (tasks in their own processes): ``Types.FLOAT()`` values are
float32 after the network, and a value outside ``Types.INT()`` fails the job naming the operator,
the value and the range, as in the embedded mode."""

from __future__ import annotations

import pytest

from rill.common import Types
from rill.runtime.errors import JobExecutionException



def test_float_is_float32_across_the_network_and_int_is_range_checked(cluster):
    env = cluster.environment()
    out = sorted(env.from_collection([0.1, 110.1]).map(lambda v: v, output_type=Types.FLOAT())
                 .rebalance().map(lambda v: v).execute_and_collect())
    assert out == [0.10000000149011612, 110.0999984741211]
    env = cluster.environment()
    env.from_collection([1, 2 ** 31]).map(lambda v: v, output_type=Types.INT()).name("Widen").print()
    with pytest.raises(JobExecutionException) as info:
        env.execute("int overflow")
    assert ("operator 'Widen' (output_type INT): value 2147483648 does not fit INT "
            "(range -2147483648..2147483647)") in str(info.value)
    cluster.wait_no_task_processes()
