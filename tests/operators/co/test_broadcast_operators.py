"""CoBroadcastWithNonKeyedOperator and CoBroadcastWithKeyedOperator through the two-input
harnesses: read-write broadcast state on the broadcast side, read-only on the other, unknown
descriptors, keyed state and timers, apply_to_keyed_state, snapshot and restore."""

import pytest

from _two_input_util import records, run_all_paths
from rill.datastream.co_functions import BroadcastProcessFunction, KeyedBroadcastProcessFunction
from rill.operators.broadcast import (
    UNKNOWN_BROADCAST_STATE_MSG,
    CoBroadcastWithKeyedOperator,
    CoBroadcastWithNonKeyedOperator,
)
from rill.operators.output_tag import OutputTag
from rill.operators.testing_two_input import (
    KeyedTwoInputStreamOperatorTestHarness,
    TwoInputStreamOperatorTestHarness,
)
from rill.operators.timer_service import TimeDomain
from rill.common.streamrecord import MIN_TIMESTAMP, StreamRecord, Watermark
from rill.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from rill.state.operator_state import BroadcastState, ReadOnlyBroadcastState

RULES = MapStateDescriptor("rules")
LIMITS = MapStateDescriptor("limits")
UNMATCHED = OutputTag("unmatched")


class ApplyRules(BroadcastProcessFunction):
    """Broadcast elements ("rule", name, factor) set rules, ("limit", n) set a limit; data
    elements (name, x) become x * factor, or go to the side output."""

    def process_broadcast_element(self, value, ctx):
        assert isinstance(ctx.get_broadcast_state(RULES), BroadcastState)
        if value[0] == "rule":
            ctx.get_broadcast_state(RULES).put(value[1], value[2])
        elif value[0] == "drop":
            ctx.get_broadcast_state(RULES).remove(value[1])
        else:
            ctx.get_broadcast_state(LIMITS)["limit"] = value[1]
        yield ("ack", value, ctx.timestamp(), sorted(ctx.get_broadcast_state(RULES).items()))

    def process_element(self, value, ctx):
        rules = ctx.get_broadcast_state(RULES)
        assert isinstance(rules, ReadOnlyBroadcastState)
        if value[0] not in rules:
            yield UNMATCHED, value
            return
        result = value[1] * rules.get(value[0])
        limit = ctx.get_broadcast_state(LIMITS).get("limit")
        yield (value[0], result if limit is None else min(result, limit), ctx.current_watermark())


def non_keyed(fn=None):
    return lambda: TwoInputStreamOperatorTestHarness(CoBroadcastWithNonKeyedOperator(fn or ApplyRules(), [RULES, LIMITS]))


def test_non_keyed_broadcast_state_is_written_by_the_broadcast_side_and_read_by_the_other():
    script = [(1, ("a", 2), 1), (2, ("rule", "a", 10), 2), (1, ("a", 3), 3), (1, ("b", 1), 4),
              (2, ("rule", "b", 100), 5), (2, ("limit", 150), 6), ("w1", 6), ("w2", 6),
              (1, ("b", 2), 7), (1, ("a", 4), 8), (2, ("drop", "a"), 9), (1, ("a", 5), 10)]
    out, side = run_all_paths(non_keyed(), script)
    assert out == [
        StreamRecord(("ack", ("rule", "a", 10), 2, [("a", 10)]), 2),
        StreamRecord(("a", 30, MIN_TIMESTAMP), 3),
        StreamRecord(("ack", ("rule", "b", 100), 5, [("a", 10), ("b", 100)]), 5),
        StreamRecord(("ack", ("limit", 150), 6, [("a", 10), ("b", 100)]), 6),
        Watermark(6),
        StreamRecord(("b", 150, 6), 7),
        StreamRecord(("a", 40, 6), 8),
        StreamRecord(("ack", ("drop", "a"), 9, [("b", 100)]), 9),
    ]
    assert side == {UNMATCHED: records([("a", 2), ("b", 1), ("a", 5)], [1, 4, 10])}


@pytest.mark.parametrize("write", [
    lambda s: s.put("k", 1), lambda s: s.put_all({"k": 1}), lambda s: s.remove("k"), lambda s: s.clear(),
    lambda s: s.__setitem__("k", 1), lambda s: s.__delitem__("k"),
])
def test_non_broadcast_side_cannot_write_the_broadcast_state(write):
    class Writer(ApplyRules):
        def process_element(self, value, ctx):
            write(ctx.get_broadcast_state(RULES))

    with TwoInputStreamOperatorTestHarness(CoBroadcastWithNonKeyedOperator(Writer(), [RULES]),
                                           task_name="rules op") as h:
        with pytest.raises(TypeError, match="does not allow modify operation.*'rules' of operator 'rules op'"):
            h.process_element1(("a", 1), 1)
        assert h.operator.get_broadcast_state(RULES).is_empty()


def test_unknown_descriptor_raises_flinks_message():
    class Typo(ApplyRules):
        def process_broadcast_element(self, value, ctx):
            ctx.get_broadcast_state(MapStateDescriptor("rulez"))

    with TwoInputStreamOperatorTestHarness(CoBroadcastWithNonKeyedOperator(Typo(), [RULES])) as h:
        with pytest.raises(ValueError, match="The requested state does not exist") as info:
            h.process_element2("x", None)
        assert UNKNOWN_BROADCAST_STATE_MSG in str(info.value)


def test_broadcast_operator_needs_map_state_descriptors():
    with pytest.raises(ValueError, match="at least one MapStateDescriptor"):
        CoBroadcastWithNonKeyedOperator(ApplyRules(), [])
    with pytest.raises(TypeError, match="MapStateDescriptors, got .*ValueStateDescriptor"):
        CoBroadcastWithNonKeyedOperator(ApplyRules(), [ValueStateDescriptor("v")])


def test_every_subtask_holds_its_own_copy_and_it_is_snapshotted_as_broadcast_state():
    harnesses = [TwoInputStreamOperatorTestHarness(CoBroadcastWithNonKeyedOperator(ApplyRules(), [RULES, LIMITS]),
                                                   parallelism=2, subtask_index=i) for i in range(2)]
    for h in harnesses:
        with h:
            h.process_element2(("rule", "a", 10), 1)
            h.process_element2(("limit", 7), 2)
            h.process_element1(("a", 1), 3)
            assert h.extract_output_values()[-1] == ("a", 7, MIN_TIMESTAMP)
            snapshot = h.operator.snapshot_state(1, 0)
        assert snapshot == {"rules": ("BROADCAST", [("a", 10)]), "limits": ("BROADCAST", [("limit", 7)])}

    restored = CoBroadcastWithNonKeyedOperator(ApplyRules(), [RULES, LIMITS])
    h = TwoInputStreamOperatorTestHarness(restored)
    h.setup()
    restored.restore_state(snapshot, checkpoint_id=1)
    with h:
        h.process_element1(("a", 2), 4)
    assert h.extract_output_values() == [("a", 7, MIN_TIMESTAMP)]


# -- keyed --------------------------------------------------------------------------------------

class KeyedRules(KeyedBroadcastProcessFunction):
    """Data (key, x) is summed per key in keyed state; an event-time timer at ts + 5 emits
    sum * factor of the key's rule. Broadcast ("rule", key, factor) sets a rule, ("reset",)
    clears every key's sum through apply_to_keyed_state."""

    SUM = ValueStateDescriptor("sum")

    def open(self, ctx):
        self.sum = ctx.get_state(self.SUM)

    def process_element(self, value, ctx):
        self.sum.update((self.sum.value() or 0) + value[1])
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 5)
        yield ("in", ctx.get_current_key(), ctx.get_broadcast_state(RULES).get(ctx.get_current_key()))

    def process_broadcast_element(self, value, ctx):
        if value[0] == "rule":
            ctx.get_broadcast_state(RULES).put(value[1], value[2])
        else:
            seen = []

            def reset(key, state):
                seen.append((key, state.value()))
                state.clear()

            ctx.apply_to_keyed_state(self.SUM, reset)
            yield ("reset", sorted(seen))

    def on_timer(self, timestamp, ctx):
        factor = ctx.get_broadcast_state(RULES).get(ctx.get_current_key()) or 0
        yield (ctx.get_current_key(), (self.sum.value() or 0) * factor, ctx.time_domain(), ctx.timestamp())


def keyed(fn=None, **kwargs):
    return lambda: KeyedTwoInputStreamOperatorTestHarness(
        CoBroadcastWithKeyedOperator(fn or KeyedRules(), [RULES]), lambda v: v[0], None, **kwargs)


def test_keyed_broadcast_keyed_state_timers_and_read_only_rules():
    script = [(2, ("rule", "a", 10), None), (1, ("a", 1), 1), (1, ("b", 2), 2), (1, ("a", 3), 3),
              (2, ("rule", "b", 100), None), ("w2", 100), ("w1", 6), ("w1", 8)]
    out, _ = run_all_paths(keyed(), script)
    assert out == [
        StreamRecord(("in", "a", 10), 1), StreamRecord(("in", "b", None), 2), StreamRecord(("in", "a", 10), 3),
        StreamRecord(("a", 40, TimeDomain.EVENT_TIME, 6), 6), Watermark(6),
        StreamRecord(("b", 200, TimeDomain.EVENT_TIME, 7), 7),
        StreamRecord(("a", 40, TimeDomain.EVENT_TIME, 8), 8), Watermark(8),
    ]


def test_apply_to_keyed_state_reaches_every_key_of_the_subtask():
    script = [(1, ("a", 1), 1), (1, ("b", 2), 2), (1, ("a", 3), 3), (2, ("reset",), 4), (2, ("reset",), 5),
              (1, ("b", 7), 6)]

    def after(h):
        h.set_current_key("a")
        assert h.operator.user_function.sum.value() is None
        h.set_current_key("b")
        assert h.operator.user_function.sum.value() == 7

    out, _ = run_all_paths(keyed(), script, after)
    assert [r.value for r in out if r.value[0] == "reset"] == [("reset", [("a", 4), ("b", 2)]), ("reset", [])]


def test_keyed_broadcast_on_timer_cannot_write_the_broadcast_state():
    class Writer(KeyedRules):
        def on_timer(self, timestamp, ctx):
            ctx.get_broadcast_state(RULES).put("x", 1)

    with keyed(Writer())() as h:
        h.process_element1(("a", 1), 1)
        h.process_watermark2(10)
        with pytest.raises(TypeError, match="does not allow modify operation"):
            h.process_watermark1(10)


def test_keyed_broadcast_needs_a_keyed_input():
    h = TwoInputStreamOperatorTestHarness(CoBroadcastWithKeyedOperator(KeyedRules(), [RULES]), task_name="kb")
    with pytest.raises(RuntimeError, match="'kb'.*KeyedBroadcastProcessFunction.*keyed stream"):
        h.open()
    h.close()


def test_keyed_broadcast_state_is_not_keyed_state():
    with keyed()() as h:
        h.process_element2(("rule", "a", 1), None)
        assert h.num_keyed_state_entries() == 0
        assert h.operator.operator_state_backend.get_registered_broadcast_state_names() == ["rules"]
        assert h.operator.get_broadcast_state(RULES).items() == [("a", 1)]
        with pytest.raises(ValueError, match="does not exist"):
            h.operator.get_broadcast_state(ListStateDescriptor("rules"))
