"""Snapshots of real operators (driven by the operator test harness) written to Parquet files,
read back equal, and restored into new operators that then give the output of an
uninterrupted run: tumbling and session window contents with their timers, a keyed process
function's state and both kinds of timers, a checkpointed function's operator state."""

from rill.common.functions import KeyedProcessFunction, MapFunction
from rill.datastream.checkpointed_function import CheckpointedFunction
from rill.operators.process import KeyedProcessOperator
from rill.operators.simple import StreamMap
from rill.operators.testing import KeyedOneInputStreamOperatorTestHarness, OneInputStreamOperatorTestHarness
from rill.operators.windowing import EventTimeSessionWindows, ProcessWindowFunction, TumblingEventTimeWindows, \
    WindowOperatorBuilder
from rill.state import ListStateDescriptor, ValueStateDescriptor
from rill.state.checkpoint.filesystem import FileSystemCheckpointStorage, resolve_checkpoint_pointer
from rill.state.checkpoint.metadata import CheckpointMetadata, OperatorState

OID = "a" * 32
JOB = "b" * 32


class Describe(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (key, context.window().start, context.window().end, sorted(v[1] for v in elements))


class CountAndRemind(KeyedProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        if n == 1:
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
            ctx.timer_service().register_processing_time_timer(100)

    def on_timer(self, timestamp, ctx):
        yield ("timer", ctx.get_current_key(), timestamp, self.count.value())


class Buffering(MapFunction, CheckpointedFunction):
    def initialize_state(self, context):
        self.state = context.get_operator_state_store().get_list_state(ListStateDescriptor("buffer"))
        self.buffer = list(self.state.get())

    def snapshot_state(self, context):
        self.state.update(self.buffer)

    def map(self, value):
        self.buffer.append(value)
        return (value, len(self.buffer))


def _through_files(tmp_path, snapshot, checkpoint_id=1):
    """Write ``snapshot`` as subtask 0, finalize, resolve from the directory, read it back."""
    location = FileSystemCheckpointStorage(str(tmp_path), JOB).initialize_location_for_checkpoint(checkpoint_id)
    handle = location.write_operator_subtask_state(OID, 0, snapshot, "op")
    pointer = location.finalize(CheckpointMetadata(checkpoint_id, 0, {OID: OperatorState(OID, 1, 128, {0: handle})}))
    restored = resolve_checkpoint_pointer(pointer).operator_states[OID].subtask_states[0].read()
    assert restored == snapshot
    return restored


def _run_windows(make_operator, first, second, tmp_path):
    """Output of ``first`` then ``second`` (elements and watermarks) uninterrupted, and with a
    snapshot through Parquet files in between."""
    def feed(h, steps):
        for step in steps:
            if step[0] == "e":
                h.process_element(step[1], step[2])
            else:
                h.process_watermark(step[1])

    with KeyedOneInputStreamOperatorTestHarness(make_operator(), lambda v: v[0]) as straight:
        feed(straight, first + second)
        expected = straight.extract_output_values()
    with KeyedOneInputStreamOperatorTestHarness(make_operator(), lambda v: v[0]) as before:
        feed(before, first)
        emitted = before.extract_output_values()
        snapshot = before.snapshot(checkpoint_id=1)
    restored = _through_files(tmp_path, snapshot)
    after = KeyedOneInputStreamOperatorTestHarness(make_operator(), lambda v: v[0])
    after.initialize_state(restored)
    after.open()
    feed(after, second)
    after.close()
    return expected, emitted + after.extract_output_values(), snapshot


def test_tumbling_window_contents_and_timers_survive_parquet(tmp_path):
    first = [("e", ("a", 1), 1), ("e", ("b", 2), 3), ("e", ("a", 3), 12), ("w", 9)]
    second = [("e", ("a", 4), 14), ("w", 30)]
    expected, got, snapshot = _run_windows(
        lambda: WindowOperatorBuilder(TumblingEventTimeWindows.of(10)).process(Describe())[0],
        first, second, tmp_path)
    assert got == expected == [("a", 0, 10, [1]), ("b", 0, 10, [2]), ("a", 10, 20, [3, 4])]
    assert any(s.key_groups for s in snapshot.timers.values())


def test_merging_session_windows_survive_parquet(tmp_path):
    first = [("e", ("a", 1), 1), ("e", ("a", 2), 15), ("e", ("b", 5), 2), ("e", ("a", 3), 8)]
    second = [("e", ("a", 4), 30), ("e", ("b", 6), 9), ("w", 100)]
    expected, got, _ = _run_windows(
        lambda: WindowOperatorBuilder(EventTimeSessionWindows.with_gap(10)).process(Describe())[0],
        first, second, tmp_path)
    assert sorted(got) == sorted(expected) == [("a", 1, 25, [1, 2, 3]), ("a", 30, 40, [4]), ("b", 2, 19, [5, 6])]


def test_keyed_process_state_and_both_timer_domains_survive_parquet(tmp_path):
    def harness():
        return KeyedOneInputStreamOperatorTestHarness(KeyedProcessOperator(CountAndRemind()), lambda v: v[0])
    with harness() as before:
        before.process_element(("a", 1), 1)
        before.process_element(("a", 2), 2)
        before.process_element(("b", 1), 5)
        snapshot = before.snapshot(checkpoint_id=3)
    after = harness()
    after.initialize_state(_through_files(tmp_path, snapshot, 3))
    after.open()
    after.process_watermark(11)
    after.set_processing_time(100)
    after.process_watermark(15)
    assert after.extract_output_values() == [
        ("timer", "a", 11, 2), ("timer", "a", 100, 2), ("timer", "b", 100, 1), ("timer", "b", 15, 1)]
    after.close()


def test_operator_state_of_a_checkpointed_function_survives_parquet(tmp_path):
    with OneInputStreamOperatorTestHarness(StreamMap(Buffering())) as before:
        before.process_elements([1, (2, "x")])
        snapshot = before.snapshot(checkpoint_id=9)
    after = OneInputStreamOperatorTestHarness(StreamMap(Buffering()))
    after.initialize_state(_through_files(tmp_path, snapshot, 9))
    after.open()
    after.process_element(3)
    assert after.extract_output_values() == [(3, 3)]
    after.close()
