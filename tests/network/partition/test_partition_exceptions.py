"""Partition errors cross process boundaries: a cluster task's failure travels pickled to the
JobMaster and the client, so each error loads again with its type, message and fields."""

from __future__ import annotations

import pickle

from rill.network.netty.exceptions import PartitionRequestTimeoutError
from rill.network.partition.consumer.remote_input_channel import RemoteProducerError
from rill.network.partition.exceptions import PartitionNotFoundError, PartitionReleasedError
from rill.network.partition.result_partition_id import ResultPartitionID
from rill.network.partitioner.key_group_stream_partitioner import KeySelectionError

PID = ResultPartitionID("p1", "attempt-1")


def _round_trip(error):
    loaded = pickle.loads(pickle.dumps(error))
    assert type(loaded) is type(error) and str(loaded) == str(error)
    return loaded


def test_regression_partition_errors_pickle_with_their_fields():
    """They took ``__init__`` arguments other than the message, so pickle (which replays
    ``args``) failed to load them and the JobMaster saw a RemoteTaskException instead."""
    released = _round_trip(PartitionReleasedError(PID, 2, RemoteProducerError("boom")))
    assert (released.partition_id, released.subpartition_index) == (PID, 2)
    assert type(released.cause) is RemoteProducerError and str(released.cause) == "boom"
    assert _round_trip(PartitionNotFoundError(PID)).partition_id == PID
    timeout = _round_trip(PartitionRequestTimeoutError("no partition p1", PID, ("127.0.0.1", 7)))
    assert (timeout.partition_id, timeout.address) == (PID, ("127.0.0.1", 7))


def test_regression_key_selection_error_pickles_with_its_record_and_key():
    error = _round_trip(KeySelectionError("cannot partition ('a', 1)", ("a", 1), ["a"]))
    assert isinstance(error, TypeError)
    assert (error.value, error.key) == (("a", 1), ["a"])
