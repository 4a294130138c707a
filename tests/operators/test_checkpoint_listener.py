"""CheckpointListener: operators forward ``notify_checkpoint_complete`` / ``_aborted`` to user
functions that implement it (Flink's ``AbstractUdfStreamOperator``), on one- and two-input
operators; functions that do not implement it are not called; the operator default is a no-op."""

from __future__ import annotations

import pytest

from rill.common.functions import CheckpointListener as CommonCheckpointListener
from rill.datastream import CheckpointListener
from rill.datastream.checkpointed_function import CheckpointedFunction
from rill.datastream.functions import CoMapFunction, MapFunction
from rill.operators.base import StreamOperator
from rill.operators.co_operators import CoStreamMap
from rill.operators.simple import StreamMap
from rill.operators.testing import OneInputStreamOperatorTestHarness
from rill.operators.testing_two_input import TwoInputStreamOperatorTestHarness


class ListeningMap(MapFunction, CheckpointedFunction, CheckpointListener):
    def __init__(self):
        self.events = []

    def initialize_state(self, context):
        self.events.append("initialize_state")

    def map(self, value):
        self.events.append(("map", value))
        return value

    def snapshot_state(self, context):
        self.events.append(("snapshot_state", context.get_checkpoint_id()))

    def notify_checkpoint_complete(self, checkpoint_id):
        self.events.append(("complete", checkpoint_id))

    def notify_checkpoint_aborted(self, checkpoint_id):
        self.events.append(("aborted", checkpoint_id))


class CompleteOnly(MapFunction, CheckpointListener):
    """Implements only the abstract method: aborts fall to the interface's no-op default."""

    def __init__(self):
        self.completed = []

    def map(self, value):
        return value

    def notify_checkpoint_complete(self, checkpoint_id):
        self.completed.append(checkpoint_id)


def test_exported_from_common_and_datastream_as_one_class():
    assert CheckpointListener is CommonCheckpointListener


def test_notifications_reach_the_function_in_order():
    fn = ListeningMap()
    with OneInputStreamOperatorTestHarness(StreamMap(fn)) as h:
        h.process_element(1)
        h.snapshot(checkpoint_id=1)
        h.process_element(2)
        h.snapshot(checkpoint_id=2)
        h.operator.notify_checkpoint_aborted(1)
        h.operator.notify_checkpoint_complete(2)
    assert fn.events == ["initialize_state", ("map", 1), ("snapshot_state", 1), ("map", 2),
                         ("snapshot_state", 2), ("aborted", 1), ("complete", 2)]


def test_abort_defaults_to_nothing():
    fn = CompleteOnly()
    with OneInputStreamOperatorTestHarness(StreamMap(fn)) as h:
        h.operator.notify_checkpoint_aborted(3)
        h.operator.notify_checkpoint_complete(4)
    assert fn.completed == [4]


def test_a_function_that_is_no_listener_is_not_called():
    class Plain(MapFunction):
        def map(self, value):
            return value

        def notify_checkpoint_complete(self, checkpoint_id):  # not a CheckpointListener
            raise AssertionError("called")

    with OneInputStreamOperatorTestHarness(StreamMap(Plain())) as h:
        h.operator.notify_checkpoint_complete(1)
        h.operator.notify_checkpoint_aborted(1)


def test_two_input_operator_forwards():
    class Listening(CoMapFunction, CheckpointListener):
        def __init__(self):
            self.events = []

        def map1(self, value):
            return value

        def map2(self, value):
            return value

        def notify_checkpoint_complete(self, checkpoint_id):
            self.events.append(("complete", checkpoint_id))

        def notify_checkpoint_aborted(self, checkpoint_id):
            self.events.append(("aborted", checkpoint_id))

    fn = Listening()
    with TwoInputStreamOperatorTestHarness(CoStreamMap(fn)) as h:
        h.operator.notify_checkpoint_complete(7)
        h.operator.notify_checkpoint_aborted(8)
    assert fn.events == [("complete", 7), ("aborted", 8)]


def test_operator_default_is_a_no_op():
    op = StreamOperator()
    assert op.notify_checkpoint_complete(1) is None
    assert op.notify_checkpoint_aborted(1) is None


def test_the_interface_requires_complete():
    class Incomplete(CheckpointListener):
        pass

    with pytest.raises(TypeError):
        Incomplete()
