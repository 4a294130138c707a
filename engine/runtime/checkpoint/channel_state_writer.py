"""One task's in-flight data of one unaligned checkpoint (FLIP-76; Flink's ``ChannelStateWriter``
with the ``ChannelStatePersister`` of each input channel), and its replay on restore.

What is stored, per task (the rule that makes a restore exactly-once):

- **output**: the buffers the barrier overtook in each
  :class:`~rill.network.partition.pipelined_subpartition.PipelinedSubpartition`, and the
  records still pending in the ``RecordWriter`` for that channel
  (:meth:`RecordWriter.broadcast_priority_event`): produced before the snapshot, delivered
  after the barrier;
- **input**: on each input channel, from the snapshot (the task's first barrier) until the
  channel's own barrier, the buffers the task processes from it
  (:meth:`ChannelStateWriter.add_input_buffer`) and the ones that had reached the channel before
  its barrier and wait behind it (:meth:`InputChannel.take_inflight_buffers
  <rill.network.partition.consumer.input_channel.InputChannel.take_inflight_buffers>`): sent
  before the barrier, processed after the snapshot.

A restore (:func:`recovered_output`, :func:`recovered_input`) sends every subpartition's
stored buffers first and processes every input channel's stored buffers before new input.

The synchronous part only keeps references to record lists (never mutated once a buffer was
emitted); :meth:`ChannelStateWriter.encode` serializes them, off the task thread, with the
network's codec (:func:`~rill.network.api.serialization.value_codec.pack_records`, one call per
buffer). Watermarks and other events in flight are not stored: sources emit them again.

Threading: everything but :meth:`ChannelStateWriter.encode` runs on the task thread.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from rill.network.api.serialization.compression import BufferDecompressor
from rill.network.api.serialization.record_serializer import DEFAULT_MAX_PAYLOAD_SIZE_BYTES
from rill.network.api.serialization.value_codec import pack_records, unpack_records
from rill.state.checkpoint.operator_subtask_state import ChannelStateSnapshot

__all__ = ["ChannelStateWriter", "recovered_output", "recovered_input"]

#: ``(values, timestamps, serialized)`` of a buffer, as the network hands it over
_Captured = Tuple[list, Optional[list], object]


class ChannelStateWriter:
    """Collects the in-flight data of checkpoint ``checkpoint_id`` in one task.

    :param checkpoint_id: the checkpoint.
    :param persisting: ``(gate index, channel index)`` of every input channel whose barrier has
        not arrived at the snapshot: what the task processes from it is stored until
        :meth:`on_channel_barrier`. Empty for a source task.

    The task thread calls :meth:`add_output_data` once (barrier out), :meth:`add_input_buffer`
    per buffer processed while :attr:`active`, :meth:`on_channel_barrier` per later barrier,
    then :meth:`complete` or :meth:`abort`; the callbacks set with :meth:`on_done` run then.
    """

    def __init__(self, checkpoint_id: int, persisting: Iterable[Tuple[int, int]] = ()) -> None:
        self.checkpoint_id = checkpoint_id
        self._persisting: Set[Tuple[int, int]] = set(persisting)
        self._output: List[Tuple[int, int, _Captured]] = []
        # (gate, channel, ("records", values, timestamps) | ("payload", bytes, compressed))
        self._input: List[Tuple[int, int, tuple]] = []
        self._on_complete: Optional[Callable[[float], None]] = None
        self._on_abort: Optional[Callable[[], None]] = None
        self._done = False
        #: whether input channels are still persisted (a buffer check costs one attribute read)
        self.active = bool(self._persisting)

    # -- collecting (task thread) ---------------------------------------------------------------
    def add_output_data(self, partition_index: int, overtaken: Sequence[Sequence[_Captured]]) -> None:
        """What the barrier overtook in partition ``partition_index``: per subpartition, the
        ``(values, timestamps, serialized)`` entries of
        :meth:`~rill.network.api.writer.record_writer.RecordWriter.broadcast_priority_event`."""
        for subpartition, entries in enumerate(overtaken):
            for entry in entries:
                self._output.append((partition_index, subpartition, entry))

    def add_input_buffer(self, gate_index: int, channel_index: int, values: list, timestamps: Optional[list]) -> None:
        """A buffer the task is about to process from channel ``channel_index`` of gate
        ``gate_index``: stored if that channel's barrier has not arrived yet."""
        if (gate_index, channel_index) in self._persisting:
            self._input.append((gate_index, channel_index, ("records", values, timestamps)))

    def on_channel_barrier(self, gate_index: int, channel_index: int, inflight: Sequence[Tuple[bytes, bool]]) -> None:
        """The channel's barrier arrived: store the data queued behind it (``inflight``: its
        :meth:`take_inflight_buffers`) and stop persisting the channel."""
        key = (gate_index, channel_index)
        if key not in self._persisting:
            return
        self._persisting.discard(key)
        self.add_inflight_buffers(gate_index, channel_index, inflight)
        self.active = bool(self._persisting)

    def add_inflight_buffers(self, gate_index: int, channel_index: int,
                             inflight: Sequence[Tuple[bytes, bool]]) -> None:
        """Store ``inflight`` (``(payload, compressed)`` pairs queued behind the barrier of a
        channel that is not persisted: the one whose barrier started the snapshot)."""
        for payload, compressed in inflight:
            self._input.append((gate_index, channel_index, ("payload", payload, compressed)))

    def stop_persisting(self, gate_index: int, channel_index: int) -> None:
        """The channel ended without a barrier: nothing more of it belongs to the checkpoint."""
        self._persisting.discard((gate_index, channel_index))
        self.active = bool(self._persisting)

    # -- end (task thread) ------------------------------------------------------------------------
    def on_done(self, on_complete: Callable[[float], None], on_abort: Callable[[], None]) -> None:
        """Call ``on_complete(alignment_duration_ms)`` when every barrier arrived, or
        ``on_abort()`` when the checkpoint is given up."""
        self._on_complete, self._on_abort = on_complete, on_abort

    def complete(self, alignment_duration_ms: float) -> None:
        """Every input channel delivered the barrier (or ended). Once."""
        if self._done:
            return
        self._done = True
        self.active = False
        self._persisting.clear()
        if self._on_complete is not None:
            self._on_complete(alignment_duration_ms)

    def abort(self) -> None:
        """The checkpoint is given up: drop what was collected. Once."""
        if self._done:
            return
        self._done = True
        self.active = False
        self._persisting.clear()
        self._input.clear()
        self._output.clear()
        if self._on_abort is not None:
            self._on_abort()

    # -- encoding (checkpoint thread) ------------------------------------------------------------
    def encode(self) -> ChannelStateSnapshot:
        """The collected buffers as payloads (uncompressed ``pack_records`` bytes).

        :raises ValueSerializationError: if a record cannot be serialized.
        """
        decompressor = BufferDecompressor(DEFAULT_MAX_PAYLOAD_SIZE_BYTES)
        output = [(p, s, _payload(entry, decompressor)) for p, s, entry in self._output]
        inputs = []
        for gate, channel, data in self._input:
            if data[0] == "records":
                inputs.append((gate, channel, pack_records(data[1], data[2])))
            else:
                payload, compressed = data[1], data[2]
                inputs.append((gate, channel, bytes(decompressor.decompress(payload)) if compressed else payload))
        return ChannelStateSnapshot(inputs, output)


def _payload(entry: _Captured, decompressor: BufferDecompressor) -> bytes:
    values, timestamps, serialized = entry
    if isinstance(serialized, tuple):  # serialized for a remote consumer already
        payload, compressed, _ = serialized
        return bytes(decompressor.decompress(payload)) if compressed else bytes(payload)
    return pack_records(values, timestamps)


def recovered_output(state: ChannelStateSnapshot) -> Dict[int, List[Tuple[int, list, Optional[list]]]]:
    """Partition index -> ``(subpartition index, values, timestamps)`` of the buffers to send
    first, in order.

    :raises ValueSerializationError: if a payload is corrupt.
    """
    out: Dict[int, List[Tuple[int, list, Optional[list]]]] = {}
    for partition, subpartition, payload in state.result_subpartitions:
        values, timestamps = unpack_records(payload)
        out.setdefault(partition, []).append((subpartition, values, timestamps))
    return out


def recovered_input(state: ChannelStateSnapshot) -> List[Tuple[int, int, list, Optional[list]]]:
    """``(gate index, channel index, values, timestamps)`` of the buffers to process before new
    input, in order.

    :raises ValueSerializationError: if a payload is corrupt.
    """
    return [(gate, channel, *unpack_records(payload)) for gate, channel, payload in state.input_channels]
