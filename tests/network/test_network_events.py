"""In-band events: immutable values that can be broadcast as one instance."""

from __future__ import annotations

import dataclasses

import pytest

from rill.network.events import (
    END_OF_PARTITION_EVENT,
    CheckpointBarrier,
    EndOfDataEvent,
    EndOfPartitionEvent,
    RuntimeEvent,
    StopMode,
    Watermark,
)
from rill.common.streamrecord import Watermark as StreamWatermark


def test_end_of_partition_instances_are_equal_and_hashable():
    assert EndOfPartitionEvent() == END_OF_PARTITION_EVENT
    assert len({EndOfPartitionEvent(), END_OF_PARTITION_EVENT}) == 1
    assert str(END_OF_PARTITION_EVENT) == "EndOfPartitionEvent"
    assert isinstance(END_OF_PARTITION_EVENT, RuntimeEvent)


def test_end_of_data_defaults_to_drain():
    assert EndOfDataEvent().stop_mode is StopMode.DRAIN
    assert EndOfDataEvent(StopMode.NO_DRAIN) != EndOfDataEvent()


def test_checkpoint_barrier_fields_and_immutability():
    barrier = CheckpointBarrier(7, 1_700_000_000_000, options="aligned")
    assert (barrier.get_id(), barrier.get_timestamp(), barrier.options) == (7, 1_700_000_000_000, "aligned")
    assert barrier == CheckpointBarrier(7, 1_700_000_000_000, "aligned")
    with pytest.raises(dataclasses.FrozenInstanceError):
        barrier.checkpoint_id = 8  # type: ignore[misc]


def test_watermark_is_the_stream_records_watermark():
    assert Watermark is StreamWatermark
