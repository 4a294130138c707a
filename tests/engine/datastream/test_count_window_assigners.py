"""PyFlink's count window assigners (``CountTumblingWindowAssigner``,
``CountSlidingWindowAssigner``): numbered CountWindows per key, in both modes; and the window
serializers' byte layouts (Flink's)."""

from __future__ import annotations

from io import BytesIO

import pytest

from _ds_helpers import collect
from rill.common import Types
from rill.datastream.functions import ProcessWindowFunction
from rill.datastream.window import (
    CountSlidingWindowAssigner,
    CountTumblingWindowAssigner,
    CountWindow,
    CountWindowSerializer,
    GlobalWindow,
    GlobalWindows,
    GlobalWindowSerializer,
    SlidingEventTimeWindows,
    TimeWindow,
    TimeWindowSerializer,
)


class Describe(ProcessWindowFunction[tuple, tuple, str, CountWindow]):
    def process(self, key, context, elements):
        yield key, context.window().id, [v for _, v in elements]


DATA = [("a", 1), ("b", 10), ("a", 2), ("a", 3), ("b", 20), ("a", 4), ("a", 5), ("b", 30), ("a", 6), ("a", 7)]


def test_tumbling_count_windows_number_each_keys_elements(env):
    ds = (env.from_collection(DATA, Types.TUPLE([Types.STRING(), Types.INT()]))
          .key_by(lambda r: r[0], key_type=Types.STRING())
          .window(CountTumblingWindowAssigner.of(3))
          .process(Describe()))
    # 'a' has 7 elements: windows 0 and 1 fill, window 2 (one element) never fires
    assert collect(ds) == [("a", 0, [1, 2, 3]), ("b", 0, [10, 20, 30]), ("a", 1, [4, 5, 6])]


def test_sliding_count_windows_overlap(env):
    ds = (env.from_collection(DATA, Types.TUPLE([Types.STRING(), Types.INT()]))
          .key_by(lambda r: r[0], key_type=Types.STRING())
          .window(CountSlidingWindowAssigner.of(3, 2))
          .process(Describe()))
    # 'a' elements n=0..6: window i holds n in [2i, 2i+2]
    assert collect(ds) == [("a", 0, [1, 2, 3]), ("a", 1, [3, 4, 5]), ("b", 0, [10, 20, 30]), ("a", 2, [5, 6, 7])]


def test_count_assigners_reject_non_positive_sizes():
    with pytest.raises(ValueError, match="CountTumblingWindowAssigner: the window size must be a positive "
                                         "number of elements, got 0"):
        CountTumblingWindowAssigner.of(0)
    with pytest.raises(ValueError, match="CountSlidingWindowAssigner: the window slide must be a positive "
                                         "number of elements, got -1"):
        CountSlidingWindowAssigner.of(3, -1)
    assert repr(CountSlidingWindowAssigner.of(3, 2)) == "CountSlidingWindowAssigner(3, 2)"


def test_window_serializers_use_flinks_layouts():
    out = BytesIO()
    TimeWindowSerializer().serialize(TimeWindow(-5, 1000), out)
    CountWindowSerializer().serialize(CountWindow(7), out)
    GlobalWindowSerializer().serialize(GlobalWindow.get(), out)
    assert out.getvalue() == (b"\xff" * 7 + b"\xfb" + b"\x00" * 6 + b"\x03\xe8"
                              + b"\x00" * 7 + b"\x07" + b"\x00")
    out.seek(0)
    assert TimeWindowSerializer().deserialize(out) == TimeWindow(-5, 1000)
    assert CountWindowSerializer().deserialize(out) == CountWindow(7)
    assert GlobalWindowSerializer().deserialize(out) is GlobalWindow.get()
    with pytest.raises(EOFError, match="CountWindowSerializer: needs 8 bytes, the stream has 0 left"):
        CountWindowSerializer().deserialize(out)
    assert SlidingEventTimeWindows.of(10, 5).get_window_serializer() == TimeWindowSerializer()
    assert GlobalWindows.create().get_window_serializer() == GlobalWindowSerializer()
    assert CountTumblingWindowAssigner.of(2).get_window_serializer() == CountWindowSerializer()
