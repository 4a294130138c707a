"""Task and job life cycle on the real embedded runtime."""

import pytest

from rill.datastream import StreamExecutionEnvironment
from rill.graph.states import ExecutionState, JobStatus
from rill.runtime.errors import JobExecutionException


def _divide(x):
    return 10 // x


@pytest.mark.parametrize("parallelism", [1, 2, 3, 4])
def test_regression_task_finishing_while_cancelled_reaches_canceled(parallelism):
    """A task that finishes its work while the JobMaster cancels it (because another task
    failed) must end CANCELED, not stay CANCELING: the job used to wait forever."""
    for _ in range(15):
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(parallelism)
        env.from_collection([1, 0, 2]).rebalance().map(_divide).name("Divide").add_sink(lambda v: None)
        client = env.execute_async("divide")
        with pytest.raises(JobExecutionException) as info:
            client.get_job_execution_result().result(timeout=10)
        assert isinstance(info.value.__cause__, ZeroDivisionError)
        assert "operator 'Divide'" in str(info.value)
        assert client.get_job_status() is JobStatus.FAILED
        states = client.get_execution_states()
        assert all(s.is_terminal() for s in states.values())
        assert ExecutionState.FAILED in states.values()
