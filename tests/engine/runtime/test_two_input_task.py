"""TwoInputStreamTask on the embedded runtime: both inputs' records reach the operator's two
input methods, each input ends separately, and the operator's watermark is the minimum of its
inputs' watermarks."""

from rill.datastream import StreamExecutionEnvironment
from rill.datastream.data_stream import DataStream
from rill.graph.transformations import TwoInputTransformation
from rill.operators.base import AbstractTwoInputStreamOperator
from rill.operators.factory import SimpleOperatorFactory
from rill.common.streamrecord import MAX_TIMESTAMP


class TagInputs(AbstractTwoInputStreamOperator):
    def process_batch1(self, values, timestamps=None):
        self.output.collect_batch([("1", v) for v in values])

    def process_batch2(self, values, timestamps=None):
        self.output.collect_batch([("2", v) for v in values])

    def process_watermark(self, watermark):
        self.output.collect(("wm", watermark.timestamp))
        super().process_watermark(watermark)

    def end_input(self, input_id=1):
        self.output.collect(("end", input_id))


def _connect(env, first, second, parallelism):
    t = TwoInputTransformation(env._new_id(), "TagInputs", SimpleOperatorFactory(TagInputs()),
                               first.get_transformation(), second.get_transformation())
    t.set_parallelism(parallelism)
    env._add_operator(t)
    return DataStream(env, t)


def test_two_inputs_reach_their_methods_and_the_watermark_waits_for_both():
    env = StreamExecutionEnvironment.get_execution_environment()
    first = env.from_collection(["a", "b", "c"])
    second = env.from_sequence(1, 4)
    out = list(_connect(env, first, second, 1).execute_and_collect())
    records = sorted(x for x in out if x[0] in ("1", "2"))
    assert records == [("1", "a"), ("1", "b"), ("1", "c"), ("2", 1), ("2", 2), ("2", 3), ("2", 4)]
    # one combined end-of-time watermark, only after both inputs sent theirs
    assert [x for x in out if x[0] == "wm"] == [("wm", MAX_TIMESTAMP)]
    assert sorted(x for x in out if x[0] == "end") == [("end", 1), ("end", 2)]
    wm_at = out.index(("wm", MAX_TIMESTAMP))
    assert all(out.index(r) < wm_at for r in out if r[0] in ("1", "2"))


def test_two_input_task_at_parallelism_2_sees_every_record_once():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    first = env.from_sequence(1, 100)
    second = env.from_sequence(101, 150)
    out = list(_connect(env, first.rebalance(), second.rebalance(), 2).execute_and_collect())
    assert sorted(v for tag, v in out if tag in ("1", "2")) == list(range(1, 151))
    assert sorted(v for tag, v in out if tag == "1") == list(range(1, 101))
    assert sorted(x for x in out if x[0] == "end") == [("end", 1), ("end", 1), ("end", 2), ("end", 2)]
    assert [x for x in out if x[0] == "wm"] == [("wm", MAX_TIMESTAMP)] * 2
