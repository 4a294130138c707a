"""``ChunkingOperator`` through the operator test harness: chunks of one input batch, never
across batches, with the last record's timestamp; watermarks pass in order."""

from __future__ import annotations

import pytest

from rill.operators.batching import ChunkingOperator
from rill.operators.testing import OneInputStreamOperatorTestHarness


def test_each_input_batch_is_cut_into_chunks_of_at_most_batch_size():
    with OneInputStreamOperatorTestHarness(ChunkingOperator(3)) as h:
        h.process_batch(list(range(7)), [10, 11, 12, 13, 14, 15, 16])
        h.process_batch([7, 8])
        h.process_element(9, 99)
        records = h.extract_output_stream_records()
    assert [r.value for r in records] == [[0, 1, 2], [3, 4, 5], [6], [7, 8], [9]]
    assert [r.timestamp for r in records[:3]] == [12, 15, 16]
    assert records[4].timestamp == 99


def test_a_watermark_follows_the_chunks_before_it():
    with OneInputStreamOperatorTestHarness(ChunkingOperator(2)) as h:
        h.process_batch([1, 2, 3], [1, 2, 3])
        h.process_watermark(3)
        out = h.get_output()
    assert [getattr(e, "value", None) for e in out[:2]] == [[1, 2], [3]]
    assert out[2].timestamp == 3


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, None])
def test_batch_size_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match=f"batch_size must be a positive int, got {bad!r}"):
        ChunkingOperator(bad)
