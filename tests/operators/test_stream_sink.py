"""StreamSink: invoke per record with its context, watermarks, finish, errors."""

import pytest

from rill.datastream.functions import SinkFunction, wrap
from rill.operators.sink import StreamSink
from rill.operators.testing import OneInputStreamOperatorTestHarness
from rill.common.streamrecord import MIN_TIMESTAMP, Watermark


class Recording(SinkFunction):
    def __init__(self):
        self.calls = []
        self.watermarks = []
        self.finished = False

    def invoke(self, value, context):
        self.calls.append((value, context.timestamp(), context.current_watermark(),
                           context.current_processing_time()))

    def write_watermark(self, watermark):
        self.watermarks.append(watermark)

    def finish(self):
        self.finished = True


def drive(per_element, timestamps):
    fn = Recording()
    with OneInputStreamOperatorTestHarness(StreamSink(fn)) as h:
        values = [1, 2, 3]
        if per_element:
            for i, v in enumerate(values[:2]):
                h.process_element(v, None if timestamps is None else timestamps[i])
        else:
            h.process_batch(values[:2], None if timestamps is None else timestamps[:2])
        h.process_watermark(7)
        h.set_processing_time(50)
        if per_element:
            h.process_element(3, None if timestamps is None else timestamps[2])
        else:
            h.process_batch([3], None if timestamps is None else timestamps[2:])
        assert not fn.finished
    assert fn.finished
    return fn, h


@pytest.mark.parametrize("timestamps", [None, [10, 11, 12]])
def test_sink_invokes_per_record_on_both_paths(timestamps):
    a, ha = drive(True, timestamps)
    b, hb = drive(False, timestamps)
    ts = timestamps or [None, None, None]
    expected = [(1, ts[0], MIN_TIMESTAMP, 0), (2, ts[1], MIN_TIMESTAMP, 0), (3, ts[2], 7, 50)]
    assert a.calls == b.calls == expected
    assert a.watermarks == b.watermarks == [Watermark(7)]
    assert ha.get_output() == hb.get_output() == [Watermark(7)]


def test_plain_callable_sink_and_error_propagation():
    seen = []

    def sink(v):
        if v == 3:
            raise OSError("disk full")
        seen.append(v)

    h = OneInputStreamOperatorTestHarness(StreamSink(wrap(sink, SinkFunction, "add_sink")))
    h.open()
    with pytest.raises(OSError, match="disk full"):
        h.process_batch([1, 2, 3, 4])
    assert seen == [1, 2]
