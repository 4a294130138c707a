"""``DataStream``, ``KeyedStream`` and ``DataStreamSink`` with PyFlink's methods
(``pyflink.datastream.data_stream``).

Every call appends a :class:`~rill.graph.transformations.Transformation` to the environment; nothing runs
until ``execute``. Functions may be Function objects or plain callables. Operator settings
(``name``, ``uid``, ``set_parallelism``...) apply to the operator that produced the stream and
return the stream, as in PyFlink.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any, Callable, Iterator, List, Optional, Union

from rill.datastream import functions as F
from rill.graph.transformations import (
    OneInputTransformation,
    PartitionTransformation,
    PhysicalTransformation,
    SideOutputTransformation,
    SinkTransformation,
    SourceTransformation,
    Transformation,
    UnionTransformation,
)
from rill.network import partitioner as P
from rill import operators as ops
from rill.common.slot_sharing_group import SlotSharingGroup
from rill.datastream.connectors.base import Sink
from rill.common.watermark_strategy import WatermarkStrategy
from rill.operators.collect_sink import CollectSinkOperator, register_channel, release_channel
from rill.operators.compacting_file_sink import CompactingFileSinkOperator
from rill.operators.field_key_selector import FieldKeySelector
from rill.operators.file_sink import FileSinkOperator
from rill.operators.sink_writer_operator import SinkWriterOperator
from rill.operators.print_sink import PrintSinkOperator
from rill.operators.watermark import TimestampsAndWatermarksOperator
from rill.operators.base import ChainingStrategy
from rill.operators.factory import SimpleOperatorFactory
from rill.state.key_groups import DEFAULT_LOWER_BOUND_MAX_PARALLELISM

if TYPE_CHECKING:  # pragma: no cover
    from rill.datastream.stream_execution_environment import StreamExecutionEnvironment
    from rill.datastream.windowed_stream import AllWindowedStream, WindowedStream

__all__ = ["DataStream", "KeyedStream", "DataStreamSink", "CloseableIterator", "ConnectedStreams",
           "BroadcastStream", "BroadcastConnectedStream", "WindowedStream"]

#: PyFlink's ``pyflink.datastream.data_stream`` also holds these; Rill defines them in modules
#: that import this one, so they are resolved on first access (PEP 562)
_DEFINED_ELSEWHERE = {
    "ConnectedStreams": "rill.datastream.connected_streams",
    "BroadcastStream": "rill.datastream.connected_streams",
    "BroadcastConnectedStream": "rill.datastream.connected_streams",
    "WindowedStream": "rill.datastream.windowed_stream",
}


def __getattr__(name: str) -> Any:
    module = _DEFINED_ELSEWHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'rill.datastream.data_stream' has no attribute '{name}'")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


class _OperatorSettings:
    """Settings of the operator that produced a stream or sink (``name``, ``uid``,
    ``set_parallelism``...), shared by :class:`DataStream` and :class:`DataStreamSink`; each
    returns ``self``."""

    _transformation: Transformation

    # -- operator settings ------------------------------------------------------------------
    def _physical(self, what: str) -> PhysicalTransformation:
        t = self._transformation
        if not isinstance(t, PhysicalTransformation):
            raise TypeError(
                f"{what} can only be set on an operator, not on a {type(t).__name__[:-len('Transformation')].lower()} "
                f"of the stream ('{t.name}')"
            )
        return t

    def name(self, name: str) -> "DataStream":
        if not isinstance(name, str) or not name:
            raise ValueError(f"The name of an operator must be a non-empty string, got {name!r}")
        self._transformation.name = name
        return self

    def set_description(self, description: str) -> "DataStream":
        self._transformation.description = description
        return self

    def uid(self, uid: str) -> "DataStream":
        self._physical("A uid").set_uid(uid)
        return self

    def set_uid_hash(self, uid_hash: str) -> "DataStream":
        self._physical("A uid hash").set_uid_hash(uid_hash)
        return self

    def set_parallelism(self, parallelism: int) -> "DataStream":
        t = self._physical("The parallelism")
        source = getattr(t, "source", None)
        non_parallel = getattr(t, "non_parallel", False) or getattr(source, "non_parallel", False)
        if non_parallel and parallelism != 1:
            raise ValueError(
                f"The parallelism of non parallel operator '{t.name}' must be 1, got {parallelism}."
            )
        t.set_parallelism(parallelism)
        return self

    def set_max_parallelism(self, max_parallelism: int) -> "DataStream":
        self._physical("The max parallelism").set_max_parallelism(max_parallelism)
        return self

    def slot_sharing_group(self, slot_sharing_group: Union[str, SlotSharingGroup]) -> "DataStream":
        """Put this operator in the slot sharing group of that name (Flink's ``slotSharingGroup``);
        a :class:`SlotSharingGroup` with resources also registers them for its name in the
        StreamGraph and JobGraph (``slot_sharing_group_resources``).

        :raises ValueError: for an empty or non-string name.
        """
        resources = None
        if isinstance(slot_sharing_group, SlotSharingGroup):
            name, resources = slot_sharing_group.get_name(), slot_sharing_group.resource_spec
        else:
            name = slot_sharing_group
        if not isinstance(name, str) or not name:
            raise ValueError(f"A slot sharing group must be a non-empty string, got {slot_sharing_group!r}")
        t = self._physical("A slot sharing group")
        t.slot_sharing_group = name
        t.slot_sharing_group_resources = resources
        return self

    def start_new_chain(self) -> "DataStream":
        self._physical("Chaining").set_chaining_strategy(ChainingStrategy.HEAD)
        return self

    def disable_chaining(self) -> "DataStream":
        self._physical("Chaining").set_chaining_strategy(ChainingStrategy.NEVER)
        return self

    def set_buffer_timeout(self, timeout_millis: int) -> "DataStream":
        """Max ms a partly filled output buffer of this operator waits (0: flush per record,
        -1: only when full)."""
        if not isinstance(timeout_millis, int) or timeout_millis < -1:
            raise ValueError(
                f"Buffer timeout of operator '{self._transformation.name}' must be -1, 0 or a "
                f"positive number of ms, got {timeout_millis!r}"
            )
        self._transformation.buffer_timeout_ms = timeout_millis
        return self


class DataStream(_OperatorSettings):
    """A stream of records produced by one transformation."""

    def __init__(self, env: "StreamExecutionEnvironment", transformation: Transformation):
        self._env = env
        self._transformation = transformation

    # -- introspection --------------------------------------------------------------------
    def get_execution_environment(self) -> "StreamExecutionEnvironment":
        return self._env

    def get_transformation(self) -> Transformation:
        return self._transformation

    def get_name(self) -> str:
        return self._transformation.name

    def get_type(self):
        return self._transformation.output_type

    def get_parallelism(self) -> int:
        t = self._transformation
        return t.parallelism if t.parallelism > 0 else self._env.get_parallelism()

    # -- transformations -------------------------------------------------------------------
    def _one_input(self, name: str, operator, output_type=None, keyed: Optional["KeyedStream"] = None) -> "DataStream":
        env = self._env
        t = OneInputTransformation(env._new_id(), name, SimpleOperatorFactory(operator), self._transformation,
                                   -1, output_type)
        if keyed is not None:
            t.state_key_selector = keyed._key_selector.get_key
            t.state_key_type = keyed._key_type
        env._add_operator(t)
        return DataStream(env, t)

    def map(self, func: Union[Callable[[Any], Any], F.MapFunction], output_type=None) -> "DataStream":
        fn = F.wrap(func, F.MapFunction, "DataStream.map")
        return self._one_input("Map", ops.StreamMap(fn), output_type, self._keyed())

    def flat_map(self, func: Union[Callable[[Any], Any], F.FlatMapFunction], output_type=None) -> "DataStream":
        fn = F.wrap(func, F.FlatMapFunction, "DataStream.flat_map")
        return self._one_input("FlatMap", ops.StreamFlatMap(fn), output_type, self._keyed())

    def filter(self, func: Union[Callable[[Any], bool], F.FilterFunction]) -> "DataStream":
        fn = F.wrap(func, F.FilterFunction, "DataStream.filter")
        return self._one_input("Filter", ops.StreamFilter(fn), self._transformation.output_type, self._keyed())

    def process(self, func: F.ProcessFunction, output_type=None) -> "DataStream":
        if isinstance(func, F.KeyedProcessFunction):
            raise TypeError(
                "DataStream.process got a KeyedProcessFunction: key the stream first with key_by()"
            )
        fn = F.wrap(func, F.ProcessFunction, "DataStream.process")
        return self._one_input("Process", ops.ProcessOperator(fn), output_type)

    def assign_timestamps_and_watermarks(self, watermark_strategy) -> "DataStream":
        """Assign event timestamps and generate watermarks with ``watermark_strategy`` (a
        ``WatermarkStrategy``), in an operator named "Timestamps/Watermarks" that runs with
        the input's parallelism and chains to it (PyFlink's
        ``assign_timestamps_and_watermarks``). Watermarks from upstream are dropped, except
        the end-of-input one. A strategy ``with_watermark_alignment`` aligns the source this
        stream comes straight from (the operator chains to it).

        :raises TypeError: if ``watermark_strategy`` is not a ``WatermarkStrategy``.
        :raises ValueError: for a strategy with watermark alignment on a stream that is not a
            source's.
        """
        if not isinstance(watermark_strategy, WatermarkStrategy):
            raise TypeError(
                f"assign_timestamps_and_watermarks expects a WatermarkStrategy, got {watermark_strategy!r}"
            )
        if (watermark_strategy.get_alignment_parameters() is not None
                and not isinstance(self._transformation, SourceTransformation)):
            raise ValueError(
                f"assign_timestamps_and_watermarks after '{self._transformation.name}': watermark alignment "
                "pauses sources, so a strategy with_watermark_alignment must be given to "
                "env.from_source(source, strategy, name) or assigned right after a source"
            )
        env = self._env
        if watermark_strategy.get_alignment_parameters() is not None:
            self._transformation.watermark_alignment = watermark_strategy.get_alignment_parameters()
        t = OneInputTransformation(env._new_id(), "Timestamps/Watermarks",
                                   SimpleOperatorFactory(TimestampsAndWatermarksOperator(watermark_strategy)),
                                   self._transformation, self._transformation.parallelism,
                                   self._transformation.output_type)
        env._add_operator(t)
        return DataStream(env, t)

    def _keyed(self) -> Optional["KeyedStream"]:
        return None

    def key_by(self, key_selector: Union[Callable[[Any], Any], F.KeySelector, int, str],
               key_type=None) -> "KeyedStream":
        """Partition by key (Flink's ``keyBy``): a ``KeySelector``, a callable, or one field given
        by ``int`` position or ``str`` name (Flink's ``keyBy(int)``/``keyBy(String)``; the key
        is the field itself, see ``rill.operators.field_key_selector``). C-level callables such
        as ``operator.itemgetter(0)`` and field keys are applied per batch, without a Python call
        per record.

        :raises TypeError: for anything else (``bool`` included).
        :raises InvalidFieldReferenceError: (a ``ValueError``) for a negative position.
        """
        if isinstance(key_selector, (int, str)) and not isinstance(key_selector, bool):
            ks = FieldKeySelector(key_selector)
        else:
            ks = F.wrap(key_selector, F.KeySelector, "DataStream.key_by")
        part_id = self._env._new_id()
        part = PartitionTransformation(part_id, self._transformation,
                                       # the key-group count is set to the consumer's max parallelism when
                                       # the JobGraph is built (Flink: ConfigurableStreamPartitioner)
                                       P.KeyGroupStreamPartitioner(ks, DEFAULT_LOWER_BOUND_MAX_PARALLELISM,
                                                                   key_token=part_id))
        return KeyedStream(self._env, part, ks, key_type, self)

    def _partition(self, partitioner) -> "DataStream":
        return DataStream(self._env, PartitionTransformation(self._env._new_id(), self._transformation, partitioner))

    def shuffle(self) -> "DataStream":
        return self._partition(P.ShufflePartitioner())

    def rebalance(self) -> "DataStream":
        return self._partition(P.RebalancePartitioner())

    def rescale(self) -> "DataStream":
        return self._partition(P.RescalePartitioner())

    def broadcast(self, *broadcast_state_descriptors):
        """Without arguments: the BROADCAST partitioner (every downstream subtask gets every
        record). With ``MapStateDescriptor`` s: a ``BroadcastStream`` carrying that broadcast
        state, for ``connect`` (PyFlink's ``broadcast(broadcast_state_descriptor)``).

        :raises TypeError: for a descriptor that is not a ``MapStateDescriptor``.
        """
        partitioned = self._partition(P.BroadcastPartitioner())
        if not broadcast_state_descriptors:
            return partitioned
        from rill.datastream.connected_streams import BroadcastStream  # noqa: PLC0415
        return BroadcastStream(partitioned, list(broadcast_state_descriptors))

    def connect(self, other):
        """Connect with ``other``: a ``DataStream`` gives ``ConnectedStreams`` (``map``/
        ``flat_map``/``process`` over both), a ``BroadcastStream`` a ``BroadcastConnectedStream``.

        :raises TypeError: if ``other`` is neither.
        :raises ValueError: if ``other`` belongs to another environment.
        """
        from rill.datastream.connected_streams import (  # noqa: PLC0415
            BroadcastConnectedStream,
            BroadcastStream,
            ConnectedStreams,
        )
        if isinstance(other, BroadcastStream):
            return BroadcastConnectedStream(self, other)
        if not isinstance(other, DataStream):
            raise TypeError(
                f"DataStream.connect expects a DataStream or a BroadcastStream, got {type(other).__name__}"
            )
        return ConnectedStreams(self, other)

    def forward(self) -> "DataStream":
        return self._partition(P.ForwardPartitioner())

    def global_(self) -> "DataStream":
        return self._partition(P.GlobalPartitioner())

    def partition_custom(self, partitioner: Union[Callable[[Any, int], int], F.Partitioner],
                         key_selector: Union[Callable[[Any], Any], F.KeySelector]) -> "DataStream":
        p = F.wrap(partitioner, F.Partitioner, "DataStream.partition_custom")
        ks = F.wrap(key_selector, F.KeySelector, "DataStream.partition_custom")
        return self._partition(P.CustomPartitionerWrapper(p, ks.get_key))

    def union(self, *streams: "DataStream") -> "DataStream":
        if not streams:
            raise ValueError("DataStream.union needs at least one other stream")
        for s in streams:
            if not isinstance(s, DataStream):
                raise TypeError(f"DataStream.union expects DataStreams, got {type(s).__name__}")
            if s._env is not self._env:
                raise ValueError("DataStream.union: all streams must belong to the same environment")
        inputs = [self._transformation] + [s._transformation for s in streams]
        return DataStream(self._env, UnionTransformation(self._env._new_id(), inputs))

    def window_all(self, window_assigner) -> "AllWindowedStream":
        """Windows over the whole (non-keyed) stream; the window operator runs with
        parallelism 1, as in Flink."""
        from rill.datastream.windowed_stream import AllWindowedStream  # noqa: PLC0415
        return AllWindowedStream(self, window_assigner)

    def count_window_all(self, size: int, slide: Optional[int] = None) -> "AllWindowedStream":
        """Count windows over the whole stream (GlobalWindows + CountTrigger (+ CountEvictor))."""
        from rill.datastream.windowed_stream import count_window_all  # noqa: PLC0415
        return count_window_all(self, size, slide)

    def get_side_output(self, output_tag) -> "DataStream":
        return DataStream(self._env, SideOutputTransformation(self._env._new_id(), self._transformation, output_tag))

    # -- sinks -----------------------------------------------------------------------------
    def _sink(self, name: str, operator) -> "DataStreamSink":
        env = self._env
        t = SinkTransformation(env._new_id(), name, SimpleOperatorFactory(operator), self._transformation)
        env._add_operator(t)
        return DataStreamSink(env, t)

    def print(self, sink_identifier: Optional[str] = None) -> "DataStreamSink":
        """Print each record to stdout (``"<subtask>> "`` prefix when parallelism > 1)."""
        return self._sink("Print to Std. Out", PrintSinkOperator(sink_identifier))

    def add_sink(self, sink_func: Union[Callable[[Any], None], F.SinkFunction]) -> "DataStreamSink":
        """A sink calling ``sink_func`` per record (a ``SinkFunction`` or a callable), or a
        ``StreamingFileSink`` (Flink's legacy file sink, written as ``FileSink`` writes)."""
        if isinstance(sink_func, Sink):
            return self._sink("Unnamed", _sink_operator(sink_func)[1])
        fn = F.wrap(sink_func, F.SinkFunction, "DataStream.add_sink")
        return self._sink("Unnamed", ops.StreamSink(fn))

    def sink_to(self, sink) -> "DataStreamSink":
        """Write to a sink object: a ``FileSink`` (exactly-once with checkpoints), your own
        ``Sink`` (its writers commit when their input ends) or a ``CollectSink``.

        :raises TypeError: for anything else.
        """
        from rill.datastream.connectors.collect import CollectSink  # noqa: PLC0415
        if isinstance(sink, Sink):
            return self._sink(*_sink_operator(sink))
        if isinstance(sink, CollectSink):
            return self._sink("CollectSink", CollectSinkOperator(sink.channel_id))
        raise TypeError(f"DataStream.sink_to expects a Sink (e.g. FileSink) or CollectSink, got {type(sink).__name__}")

    def execute_and_collect(self, job_execution_name: Optional[str] = None,
                            limit: Optional[int] = None) -> Union["CloseableIterator", List[Any]]:
        """Run the job and iterate over this stream's records. With ``limit``, return a list
        of at most ``limit`` records (the job is cancelled once they have arrived)."""
        channel = register_channel(max_batches=64)
        self._sink("Collect", CollectSinkOperator(channel.channel_id)).name("Collect Stream Sink")
        client = self._env.execute_async(job_execution_name or "Collect job", _collect_channel=channel)
        it = CloseableIterator(client, channel)
        if limit is None:
            return it
        out: List[Any] = []
        with it:  # as Flink's: stop at the limit-th record, never wait for one more
            while len(out) < limit:
                v = next(it, _END)
                if v is _END:
                    break
                out.append(v)
        return out


class KeyedStream(DataStream):
    """A stream partitioned by key; operators on it get keyed state and timers."""

    def __init__(self, env, transformation, key_selector: F.KeySelector, key_type, origin: DataStream):
        super().__init__(env, transformation)
        self._key_selector = key_selector
        self._key_type = key_type
        self._origin = origin

    def _keyed(self) -> Optional["KeyedStream"]:
        return self

    def get_key_selector(self) -> F.KeySelector:
        return self._key_selector

    def process(self, func: F.KeyedProcessFunction, output_type=None) -> DataStream:
        if not isinstance(func, F.KeyedProcessFunction):
            if isinstance(func, F.ProcessFunction):
                return self._one_input("Process", ops.ProcessOperator(func), output_type, self)
            raise TypeError(
                f"KeyedStream.process expects a KeyedProcessFunction, got {type(func).__name__}"
            )
        return self._one_input("KeyedProcess", ops.KeyedProcessOperator(func), output_type, self)

    def window(self, window_assigner) -> "WindowedStream":
        """Windows per key (Flink's ``KeyedStream.window``)."""
        from rill.datastream.windowed_stream import WindowedStream  # noqa: PLC0415
        return WindowedStream(self, window_assigner)

    def count_window(self, size: int, slide: Optional[int] = None) -> "WindowedStream":
        """Windows of ``size`` elements per key, sliding by ``slide`` elements when given."""
        from rill.datastream.windowed_stream import count_window  # noqa: PLC0415
        return count_window(self, size, slide)

    def reduce(self, func: Union[Callable[[Any, Any], Any], F.ReduceFunction]) -> DataStream:
        fn = F.wrap(func, F.ReduceFunction, "KeyedStream.reduce")
        return self._aggregate("Reduce", fn)

    def _aggregate(self, name: str, agg) -> DataStream:
        # the key_by's token: the operator takes the keys its exchange computed (KeyedBatch);
        # its state has the stream's declared type, as PyFlink's reduce state
        operator = ops.StreamGroupedReduce(agg, type_info=self._transformation.output_type,
                                           key_token=self._transformation.id)
        return self._one_input(name, operator, self._transformation.output_type, self)

    def sum(self, position_to_sum: Union[int, str] = 0) -> DataStream:
        return self._aggregate("Sum", ops.SumAggregator(position_to_sum))

    def min(self, position_to_min: Union[int, str] = 0) -> DataStream:
        return self._aggregate("Min", ops.MinAggregator(position_to_min))

    def max(self, position_to_max: Union[int, str] = 0) -> DataStream:
        return self._aggregate("Max", ops.MaxAggregator(position_to_max))

    def min_by(self, position_to_min_by: Union[int, str] = 0) -> DataStream:
        return self._aggregate("MinBy", ops.MinByAggregator(position_to_min_by))

    def max_by(self, position_to_max_by: Union[int, str] = 0) -> DataStream:
        return self._aggregate("MaxBy", ops.MaxByAggregator(position_to_max_by))

    def interval_join(self, other: "KeyedStream"):
        """Start an event-time interval join with another ``KeyedStream`` (continue with
        ``.between(lower, upper)``, see ``rill.datastream.join``).

        :raises TypeError: if ``other`` is not a ``KeyedStream``.
        """
        from rill.datastream.join import IntervalJoin  # noqa: PLC0415
        return IntervalJoin(self, other)

    # partitioning a keyed stream again drops the key, as in Flink
    def _physical(self, what: str):
        raise TypeError(f"{what} cannot be set on a KeyedStream: apply it to an operator after key_by()")


class DataStreamSink(_OperatorSettings):
    """The result of a sink call; carries the sink operator's settings."""

    def __init__(self, env, transformation: SinkTransformation):
        self._env = env
        self._transformation = transformation

    def get_transformation(self) -> SinkTransformation:
        return self._transformation


_END = object()  # end of a collect iterator


class CloseableIterator:
    """Iterates the records of an ``execute_and_collect`` job as they arrive; closing it
    (or leaving its ``with`` block) cancels the job if it still runs."""

    def __init__(self, job_client, channel):
        self._client = job_client
        self._channel = channel
        self._batch: List[Any] = []
        self._pos = 0
        self._done = False

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        while self._pos >= len(self._batch):
            if self._done:
                raise StopIteration
            batch = self._channel.get_batch()
            if batch is None:
                self._done = True
                self.close()
                raise StopIteration
            self._batch, self._pos = batch, 0
        v = self._batch[self._pos]
        self._pos += 1
        return v

    def next_batch(self) -> List[Any]:
        """The records that are next, at least one: the rest of the batch that arrived last,
        or the next batch (blocking until it arrives). ``[]`` once the job's output has ended.
        Lets a caller hop threads once per batch instead of once per record (the async
        iterator of ``rill.datastream.async_client`` does)."""
        try:
            first = next(self)
        except StopIteration:
            return []
        rest = self._batch[self._pos:]
        self._pos = len(self._batch)
        return [first, *rest]

    def close(self) -> None:
        self._channel.close()  # unblocks sink subtasks waiting for room, so cancel can stop them
        if not self._client.is_done():
            self._client.cancel()
            self._client.wait()
        release_channel(self._channel.channel_id)
        self._done = True

    def __enter__(self) -> "CloseableIterator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _sink_operator(sink: Sink):
    """``(name, operator)`` of ``sink_to(sink)``: a file sink's exactly-once operator
    (compacting when the builder enabled it), else the plain Sink V2 writer operator (Flink
    names both sinks by their kind)."""
    from rill.datastream.connectors.file_system import FileSink  # noqa: PLC0415 - file_system imports the operators
    if isinstance(sink, FileSink):
        return "FileSink", FileSinkOperator(sink) if sink.compaction is None else CompactingFileSinkOperator(sink)
    return "Sink", SinkWriterOperator(sink)
