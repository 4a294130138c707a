"""``NetworkEnvironment``: creates a task's result partitions, input gates and record writers
from its deployment descriptor (Flink's ``NettyShuffleEnvironment``), taking every buffer from
the process's :class:`~rill.network.buffer.network_buffer_pool.NetworkBufferPool`.

Channels: a channel whose location in the ``InputGateDeploymentDescriptor`` is ``None`` reads a
partition of this process (``LocalInputChannel``); a channel with a ``(host, port)`` location
reads from that TaskExecutor's network server (``RemoteInputChannel``, through this process's
``NettyConnectionManager``). The embedded runtime has only local channels; in cluster mode every
channel between two tasks is remote.

Buffer budget, in segments of the NetworkBufferPool (one buffer = one segment; a local buffer
holds a batch of up to ``records_per_buffer`` records, a remote one up to ``segment_size`` bytes):

* a produced partition of ``n`` subpartitions: Flink's ``n + 1`` at least, up to
  ``n * buffers_per_channel + floating_buffers_per_gate`` (its LocalBufferPool; when all are in
  flight the writer blocks: that is backpressure). The pool takes its maximum when the budget
  allows, otherwise what is left after the task's other minimums;
* an input gate with ``r`` remote channels: ``r * buffers_per_channel`` exclusive buffers and
  up to ``floating_buffers_per_gate`` floating ones (at least one). Local channels need no
  receiving buffers: they read the producer's buffers.

A task whose minimum does not fit fails at deployment (``Task`` construction, so the JobMaster's
``submit_task``) with :class:`~rill.network.buffer.network_buffer_pool.InsufficientNetworkBuffersError`
naming ``taskmanager.memory.network.max``. Segments go back when a partition is released (its
pool destroyed; buffers in flight return theirs when recycled) and when a remote channel is
released (after EndOfPartition, or when its gate is closed).

Metrics (Flink's ``numBytesIn``/``numBytesOut``/``inPoolUsage``): :meth:`NetworkEnvironment.num_bytes_in`,
:meth:`NetworkEnvironment.num_bytes_out`, :meth:`NetworkEnvironment.input_pool_usage`. Local
exchanges count 0 bytes: Rill does not serialize buffers between tasks of one process.
"""

from __future__ import annotations

import re
import threading
import weakref
from typing import Any, List, Optional, Sequence, Tuple

from rill.common.configuration import ConfigOption, ConfigOptions, Configuration, load_configuration
from rill.network.api.writer.record_writer import RecordWriter
from rill.network.buffer.network_buffer_pool import InsufficientNetworkBuffersError, NetworkBufferPool, SegmentLease
from rill.network.partition.consumer.buffer_manager import FloatingBufferPool
from rill.network.partition.consumer.local_input_channel import LocalInputChannel
from rill.network.partition.consumer.remote_input_channel import RemoteInputChannel
from rill.network.partition.consumer.single_input_gate import SingleInputGate
from rill.network.partition.result_partition import ResultPartition
from rill.network.partition.result_partition_type import ResultPartitionType

__all__ = ["NetworkEnvironment", "create_network_buffer_pool", "parse_memory_size"]

_UNITS = {
    "": 1, "b": 1, "bytes": 1,
    "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "kibibytes": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20, "mebibytes": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "gibibytes": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40, "tebibytes": 1 << 40,
}
_SIZE = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$")


def parse_memory_size(value: Any, key: str = "memory size") -> int:
    """A memory size in bytes, from an int or Flink's ``MemorySize`` text (``"67108864"``,
    ``"64mb"``, ``"64 m"``, ``"32kb"``, ``"1g"``; units are powers of 1024).

    :param key: names the option in the error message.
    :raises ValueError: for a negative number or text that is not a size.
    """
    if isinstance(value, bool):
        raise ValueError(f"'{key}' must be a memory size, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"'{key}' must be >= 0 bytes, got {value}")
        return value
    match = _SIZE.match(str(value).lower())
    if match is None or match.group(2) not in _UNITS:
        raise ValueError(f"'{key}' must be a memory size such as 67108864, '64mb' or '32kb', got {value!r}")
    return int(match.group(1)) * _UNITS[match.group(2)]


def _memory_option(configuration: Configuration, option: ConfigOption) -> int:
    raw = configuration.get_string(option.key)
    return option.default if raw is None else parse_memory_size(raw, option.key)


def create_network_buffer_pool(configuration: Optional[Configuration] = None) -> NetworkBufferPool:
    """The NetworkBufferPool a TaskExecutor gets from its configuration:
    ``taskmanager.memory.network.max // taskmanager.memory.segment-size`` segments.

    :param configuration: ``None``: :func:`~rill.common.configuration.load_configuration`
        (defaults, config file, ``RILL_*`` environment variables).
    :raises ValueError: for a size that does not parse or a segment size of 0.
    """
    conf = configuration if configuration is not None else load_configuration()
    max_bytes = _memory_option(conf, ConfigOptions.NETWORK_MEMORY_MAX)
    segment_size = _memory_option(conf, ConfigOptions.MEMORY_SEGMENT_SIZE)
    if segment_size < 1:
        raise ValueError(f"'{ConfigOptions.MEMORY_SEGMENT_SIZE.key}' must be at least 1 byte, got {segment_size}")
    return NetworkBufferPool.from_memory_size(max_bytes, segment_size)


class _GateSegments:
    """The receiving buffers of one gate's remote channels, taken from the NetworkBufferPool:
    each channel's exclusive segments go back when it is released, the floating ones with the
    last channel."""

    def __init__(self, lease: SegmentLease, exclusive_per_channel: int, num_channels: int,
                 floating_pool: FloatingBufferPool) -> None:
        self.lease = lease
        self.exclusive_per_channel = exclusive_per_channel
        self.floating_pool = floating_pool
        self._remaining = num_channels
        self._lock = threading.Lock()

    def channel_released(self) -> None:
        with self._lock:
            if self._remaining <= 0:
                return
            self._remaining -= 1
            last = self._remaining == 0
        self.lease.recycle(min(self.exclusive_per_channel, self.lease.segments))
        if last:
            self.lease.recycle()


class _BudgetedRemoteInputChannel(RemoteInputChannel):
    """A RemoteInputChannel that gives its exclusive segments back to the NetworkBufferPool when
    released (Flink's ``RemoteInputChannel.releaseAllResources`` recycles its exclusive
    segments to the global pool)."""

    def __init__(self, *args, gate_segments: _GateSegments, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._gate_segments: Optional[_GateSegments] = gate_segments

    def release(self) -> None:
        """Release the channel (see :meth:`RemoteInputChannel.release`) and give its segments
        back to the process's budget. Idempotent."""
        try:
            super().release()
        finally:
            segments, self._gate_segments = self._gate_segments, None
            if segments is not None:
                segments.channel_released()


class NetworkEnvironment:
    """Per TaskExecutor: creates and registers partitions, gates and writers.

    :param partition_manager: the TaskExecutor's ``ResultPartitionManager``.
    :param connection_manager: this process's started
        :class:`~rill.network.netty.connection_manager.NettyConnectionManager`, needed for
        channels with a remote location; ``None`` (embedded mode): every channel must be local.
    :param network_buffer_pool: the process's budget of network buffers; ``None``: one is
        created from ``configuration`` (:func:`create_network_buffer_pool`).
    :param configuration: read only when ``network_buffer_pool`` is ``None``
        (``taskmanager.memory.network.max``, ``taskmanager.memory.segment-size``); ``None``:
        :func:`~rill.common.configuration.load_configuration`.

    Thread-safety: the ``create_*`` methods may be called from any thread (the budget is
    thread-safe); the metric methods read counters without locks and may run on any thread.
    """

    def __init__(self, partition_manager, connection_manager=None,
                 network_buffer_pool: Optional[NetworkBufferPool] = None,
                 configuration: Optional[Configuration] = None):
        self.partition_manager = partition_manager
        self.connection_manager = connection_manager
        self.network_buffer_pool = (network_buffer_pool if network_buffer_pool is not None
                                    else create_network_buffer_pool(configuration))
        self._floating_pools: "weakref.WeakKeyDictionary[SingleInputGate, FloatingBufferPool]" = (
            weakref.WeakKeyDictionary())

    # ------------------------------------------------------------------ requirements

    @staticmethod
    def partition_buffers(tdd, pdd) -> Tuple[int, int]:
        """``(required, maximum)`` buffers of one produced partition (Flink's
        ``getMinMaxNetworkBuffersPerResultPartition``): ``n + 1`` and
        ``max(n + 1, n * buffers_per_channel + floating_buffers_per_gate)`` for ``n``
        subpartitions."""
        n, network = pdd.num_subpartitions, tdd.network_options
        required = n + 1
        return required, max(required, n * network.buffers_per_channel + network.floating_buffers_per_gate)

    @staticmethod
    def gate_buffers(tdd, gdd) -> Tuple[int, int]:
        """``(required, maximum)`` receiving buffers of one input gate: for ``r`` remote
        channels ``r * buffers_per_channel`` exclusive plus at least one (at most
        ``floating_buffers_per_gate``) floating; ``(0, 0)`` for a gate of local channels."""
        remote = sum(1 for location in _locations(gdd) if location is not None)
        if remote == 0:
            return 0, 0
        exclusive = remote * tdd.network_options.buffers_per_channel
        floating = tdd.network_options.floating_buffers_per_gate
        return exclusive + min(1, floating), exclusive + floating

    def _check_task_fits(self, tdd) -> None:
        parts = sum(self.partition_buffers(tdd, pdd)[0] for pdd in tdd.produced_partitions)
        gates = sum(self.gate_buffers(tdd, gdd)[0] for gdd in tdd.input_gates)
        pool = self.network_buffer_pool
        available = pool.get_number_of_available_memory_segments()
        if parts + gates > available:
            raise InsufficientNetworkBuffersError(
                parts + gates, available, pool.get_total_number_of_memory_segments(),
                pool.get_memory_segment_size(),
                f"(Task '{tdd.task_name_with_subtasks}' needs at least {parts} buffers for its "
                f"{len(tdd.produced_partitions)} result partition(s) and {gates} for the remote "
                f"channels of its input gates.)")

    def _check_locations(self, tdd) -> None:
        for gdd in tdd.input_gates:
            locations = _locations(gdd)
            if len(locations) != len(gdd.channels):
                raise ValueError(
                    f"Input gate {gdd.gate_index} of '{tdd.task_name_with_subtasks}' has "
                    f"{len(gdd.channels)} channels but {len(locations)} locations")
            if self.connection_manager is None:
                for index, location in enumerate(locations):
                    if location is not None:
                        pid, sub = gdd.channels[index]
                        raise RuntimeError(
                            f"Channel {index} of input gate {gdd.gate_index} of "
                            f"'{tdd.task_name_with_subtasks}' reads subpartition {sub} of partition "
                            f"{pid} from {location[0]}:{location[1]}, but this TaskExecutor has no "
                            "network connection manager (remote channels need a started "
                            "NettyConnectionManager; the embedded runtime is local only)")

    # ------------------------------------------------------------------ creation

    def create_result_partitions(self, tdd) -> List[ResultPartition]:
        """Create and register the task's partitions (in the order of its out edges), each with
        a LocalBufferPool carved from the NetworkBufferPool.

        Checks first that the task's minimum -- its partitions' and its gates' required
        buffers -- fits the budget, and that its remote channels can be served.

        :raises InsufficientNetworkBuffersError: if the task's required buffers are not
            available (nothing is created then).
        :raises RuntimeError: if a channel is remote and there is no connection manager.
        :raises ValueError: if a gate's ``locations`` and ``channels`` differ in length.
        """
        self._check_locations(tdd)
        self._check_task_fits(tdd)
        pool = self.network_buffer_pool
        needs = [self.partition_buffers(tdd, pdd) for pdd in tdd.produced_partitions]
        gate_minimum = sum(self.gate_buffers(tdd, gdd)[0] for gdd in tdd.input_gates)
        partitions: List[ResultPartition] = []
        try:
            for i, (pdd, (required, maximum)) in enumerate(zip(tdd.produced_partitions, needs)):
                # Take the maximum if the budget allows, but leave the task's other minimums.
                later = sum(r for r, _ in needs[i + 1:]) + gate_minimum
                cap = min(maximum, max(required, pool.get_number_of_available_memory_segments() - later))
                n = pdd.num_subpartitions
                buffer_pool = pool.create_buffer_pool(
                    required, cap, name=f"{tdd.task_name_with_subtasks} -> {pdd.target_name}")
                partition = ResultPartition(pdd.partition_id, ResultPartitionType.PIPELINED_BOUNDED, n, buffer_pool,
                                            owning_task_name=tdd.task_name_with_subtasks)
                try:
                    self.partition_manager.register_result_partition(partition)
                except BaseException:
                    partition.release()
                    raise
                partitions.append(partition)
        except BaseException as error:
            for partition in partitions:
                self.partition_manager.release_partition(partition.partition_id, error)
            raise
        return partitions

    def create_input_gates(self, tdd) -> List[SingleInputGate]:
        """Create the task's input gates: a local channel per channel without a location, a
        remote one (with exclusive buffers and the gate's floating pool, taken from the
        NetworkBufferPool) per channel with a ``(host, port)`` location.

        The Task creates its partitions first: if its gates cannot be created the Task is never
        built, so the partitions registered for ``tdd`` are released here (with the error as
        cause) and their buffers returned.

        :raises InsufficientNetworkBuffersError: if the remote channels' buffers are not
            available.
        :raises RuntimeError: if a channel is remote and there is no connection manager.
        :raises ValueError: if a gate's ``locations`` and ``channels`` differ in length.
        """
        gates: List[SingleInputGate] = []
        channels: list = []
        leases: List[SegmentLease] = []
        try:
            self._check_locations(tdd)
            for gdd in tdd.input_gates:
                gate_channels = self._create_channels(tdd, gdd, leases)
                channels.extend(gate_channels)
                gate = SingleInputGate(gdd.gate_index, gate_channels, owning_task_name=tdd.task_name_with_subtasks)
                floating = next((c._gate_segments.floating_pool for c in gate_channels
                                 if isinstance(c, _BudgetedRemoteInputChannel)), None)
                if floating is not None:
                    self._floating_pools[gate] = floating
                gates.append(gate)
        except BaseException as error:
            for channel in channels:
                channel.release()
            for lease in leases:
                lease.recycle()
            for pdd in tdd.produced_partitions:
                self.partition_manager.release_partition(pdd.partition_id, error)
            raise
        return gates

    def _create_channels(self, tdd, gdd, leases: List[SegmentLease]) -> list:
        locations = _locations(gdd)
        required, maximum = self.gate_buffers(tdd, gdd)
        segments: Optional[_GateSegments] = None
        if maximum:
            name = f"{tdd.task_name_with_subtasks} gate {gdd.gate_index}"
            lease = self.network_buffer_pool.request_segments(required, maximum, f"{name} receiving buffers")
            leases.append(lease)
            remote = sum(1 for location in locations if location is not None)
            exclusive = remote * tdd.network_options.buffers_per_channel
            floating_pool = FloatingBufferPool(lease.granted - exclusive, f"{name} floating buffers")
            segments = _GateSegments(lease, tdd.network_options.buffers_per_channel, remote, floating_pool)
        channels: list = []
        try:
            for (pid, sub), location in zip(gdd.channels, locations):
                if location is None:
                    channels.append(LocalInputChannel(self.partition_manager, pid, sub))
                else:
                    channels.append(_BudgetedRemoteInputChannel(
                        self.connection_manager, tuple(location), pid, sub, segments.floating_pool,
                        exclusive_buffers=tdd.network_options.buffers_per_channel, gate_segments=segments))
        except BaseException:
            for channel in channels:
                channel.release()
            raise
        return channels

    def create_record_writers(self, tdd, partitions: List[ResultPartition]) -> List[Any]:
        """One RecordWriter per partition (``flush_always`` when ``buffer_timeout_ms == 0``). In
        cluster mode (a connection manager) every consumer is in another process, so a HASH
        exchange's keys are not carried: they would not cross the wire."""
        flush_always = tdd.buffer_timeout_ms == 0
        carry_keys = self.connection_manager is None
        return [
            RecordWriter(partition, pdd.partitioner, records_per_buffer=tdd.network_options.records_per_buffer,
                         flush_always=flush_always, carry_keys=carry_keys)
            for pdd, partition in zip(tdd.produced_partitions, partitions)
        ]

    # ------------------------------------------------------------------ metrics

    @staticmethod
    def num_bytes_in(gates: Sequence[SingleInputGate]) -> int:
        """Flink's ``numBytesIn``: payload bytes received by the gates' remote channels
        (``RemoteInputChannel.bytes_received``, data and events). Local channels count 0:
        their buffers are not serialized."""
        total = 0
        for gate in gates:
            for index in range(gate.get_number_of_input_channels()):
                total += getattr(gate.get_channel(index), "bytes_received", 0)
        return total

    @staticmethod
    def num_bytes_out(partitions: Sequence[ResultPartition]) -> int:
        """Flink's ``numBytesOut``: payload bytes the network server serialized from the
        partitions for remote consumers (:meth:`ResultPartition.get_number_of_bytes_out`).
        Subpartitions read by local channels count 0."""
        return sum(p.get_number_of_bytes_out() for p in partitions)

    def floating_pool(self, gate: SingleInputGate) -> Optional[FloatingBufferPool]:
        """The gate's floating buffer pool, ``None`` for a gate with only local channels."""
        return self._floating_pools.get(gate)

    def reader_statistics(self) -> tuple:
        """Snapshots of the network server's subpartition readers in this process (empty
        without a connection manager)."""
        manager = self.connection_manager
        return () if manager is None else manager.reader_statistics()

    def input_pool_usage(self, gates: Sequence[SingleInputGate]) -> float:
        """Flink's ``inPoolUsage``: receiving buffers in use over all receiving buffers, summed
        over the gates' remote channels (exclusive buffers holding data, floating buffers lent
        to channels; over exclusive buffers plus floating pool sizes), in [0, 1]. 0.0 for a
        task with only local channels (they have no receiving buffers)."""
        used = total = 0
        for gate in gates:
            pool = self._floating_pools.get(gate)
            if pool is None:
                continue
            stats = pool.statistics()
            used += stats.assigned_buffers
            total += stats.total_buffers
            for index in range(gate.get_number_of_input_channels()):
                channel = gate.get_channel(index)
                if isinstance(channel, RemoteInputChannel):
                    manager = channel.buffer_manager.statistics()
                    used += manager.exclusive_buffers_in_use
                    total += manager.exclusive_buffers
        return used / total if total else 0.0


def _locations(gdd) -> List[Optional[Tuple[str, int]]]:
    locations = getattr(gdd, "locations", None)
    return [None] * len(gdd.channels) if locations is None else list(locations)
