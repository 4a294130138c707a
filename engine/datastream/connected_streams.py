"""``ConnectedStreams``, ``BroadcastStream`` and ``BroadcastConnectedStream`` with PyFlink's
methods (``pyflink.datastream.data_stream``; Flink's classes of the same names in
``org.apache.flink.streaming.api.datastream``).

``a.connect(b)`` gives :class:`ConnectedStreams`; its ``map``/``flat_map``/``process`` add one
:class:`~rill.graph.transformations.TwoInputTransformation` whose operator receives ``a``'s
records on input 1 and ``b``'s on input 2. When both inputs are ``KeyedStream`` s (after
``key_by`` on each, or ``ConnectedStreams.key_by``) the operator is keyed: both inputs are
hash-partitioned by their key selectors over the same key groups (the operator's max
parallelism), and keyed state and timers are scoped to the key of the record being processed.

``s.broadcast(descriptor, ...)`` gives a :class:`BroadcastStream` (the BROADCAST partitioner: every
subtask of the consumer gets every element); ``data.connect(broadcast_stream)`` gives a
:class:`BroadcastConnectedStream` whose ``process`` takes a ``BroadcastProcessFunction`` (non-keyed
``data``) or a ``KeyedBroadcastProcessFunction`` (keyed ``data``).

The resulting operators run with the environment's default parallelism unless set on the
returned stream, as in Flink.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, List, Optional, Union

from rill.datastream import co_functions as CF
from rill.datastream import functions as F
from rill.datastream.data_stream import DataStream, KeyedStream
from rill.graph.transformations import TwoInputTransformation
from rill.operators.broadcast import (
    CoBroadcastWithKeyedOperator,
    CoBroadcastWithNonKeyedOperator,
    check_broadcast_state_descriptors,
)
from rill.operators.co_operators import CoProcessOperator, CoStreamFlatMap, CoStreamMap, KeyedCoProcessOperator
from rill.operators.factory import SimpleOperatorFactory

if TYPE_CHECKING:  # pragma: no cover
    from rill.datastream.stream_execution_environment import StreamExecutionEnvironment

__all__ = ["ConnectedStreams", "BroadcastStream", "BroadcastConnectedStream"]


def _check_function(func: Any, kinds: tuple, api_call: str) -> None:
    if not isinstance(func, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise TypeError(f"{api_call} expects a {names}, got {func!r} of type {type(func).__name__}")


def _two_input(env: "StreamExecutionEnvironment", name: str, operator: Any, input1: Any, input2: Any,
               output_type: Any, key_selector1: Optional[Callable[[Any], Any]] = None,
               key_selector2: Optional[Callable[[Any], Any]] = None, key_type: Any = None) -> DataStream:
    t = TwoInputTransformation(env._new_id(), name, SimpleOperatorFactory(operator), input1, input2, -1, output_type)
    t.state_key_selector1 = key_selector1
    t.state_key_selector2 = key_selector2
    t.state_key_type = key_type
    env._add_operator(t)
    return DataStream(env, t)


class ConnectedStreams:
    """Two streams, possibly of different types, processed together by one operator that may
    share state between them (Flink's ``ConnectedStreams``).

    :param stream1: the first input.
    :param stream2: the second input.
    :raises TypeError: if an input is not a ``DataStream``.
    :raises ValueError: if the inputs belong to different environments.
    """

    def __init__(self, stream1: DataStream, stream2: DataStream) -> None:
        for s in (stream1, stream2):
            if not isinstance(s, DataStream):
                raise TypeError(f"ConnectedStreams connects DataStreams, got {s!r} of type {type(s).__name__}")
        if stream1.get_execution_environment() is not stream2.get_execution_environment():
            raise ValueError("DataStream.connect: both streams must belong to the same environment")
        self.stream1 = stream1
        self.stream2 = stream2
        self._env = stream1.get_execution_environment()

    def get_execution_environment(self) -> "StreamExecutionEnvironment":
        return self._env

    def get_first_input(self) -> DataStream:
        return self.stream1

    def get_second_input(self) -> DataStream:
        return self.stream2

    def _is_keyed(self) -> bool:
        return isinstance(self.stream1, KeyedStream) and isinstance(self.stream2, KeyedStream)

    def key_by(self, key_selector1: Union[Callable[[Any], Any], F.KeySelector],
               key_selector2: Union[Callable[[Any], Any], F.KeySelector], key_type: Any = None) -> "ConnectedStreams":
        """Key both inputs: input 1 by ``key_selector1``, input 2 by ``key_selector2`` (both
        must give keys of the same type, so equal keys meet in the same subtask).

        :raises TypeError: if a selector is neither a ``KeySelector`` nor callable.
        """
        return ConnectedStreams(self.stream1.key_by(key_selector1, key_type),
                                self.stream2.key_by(key_selector2, key_type))

    def _transform(self, name: str, operator: Any, output_type: Any) -> DataStream:
        s1, s2 = self.stream1, self.stream2
        if self._is_keyed():
            t1, t2 = s1._key_type, s2._key_type
            if t1 is not None and t2 is not None and t1 != t2:
                raise ValueError(
                    f"Key types of the connected KeyedStreams don't match: {t1!r} and {t2!r} (operator '{name}')"
                )
            return _two_input(self._env, name, operator, s1.get_transformation(), s2.get_transformation(),
                              output_type, s1._key_selector.get_key, s2._key_selector.get_key,
                              t1 if t1 is not None else t2)
        return _two_input(self._env, name, operator, s1.get_transformation(), s2.get_transformation(), output_type)

    def map(self, func: CF.CoMapFunction, output_type: Any = None) -> DataStream:
        """Apply ``func.map1`` to input 1 and ``func.map2`` to input 2 (operator ``"Co-Map"``).

        :raises TypeError: unless ``func`` is a ``CoMapFunction``.
        """
        _check_function(func, (CF.CoMapFunction,), "ConnectedStreams.map")
        return self._transform("Co-Map", CoStreamMap(func), output_type)

    def flat_map(self, func: CF.CoFlatMapFunction, output_type: Any = None) -> DataStream:
        """Apply ``func.flat_map1``/``flat_map2`` (operator ``"Co-Flat Map"``).

        :raises TypeError: unless ``func`` is a ``CoFlatMapFunction``.
        """
        _check_function(func, (CF.CoFlatMapFunction,), "ConnectedStreams.flat_map")
        return self._transform("Co-Flat Map", CoStreamFlatMap(func), output_type)

    def process(self, func: Union[CF.CoProcessFunction, CF.KeyedCoProcessFunction], output_type: Any = None) -> DataStream:
        """Run a ``CoProcessFunction`` (operator ``"Co-Process"``; with keyed state and timers
        when both inputs are keyed) or a ``KeyedCoProcessFunction`` (operator
        ``"Keyed Co-Process"``; both inputs must be keyed).

        :raises TypeError: for another function, or a ``KeyedCoProcessFunction`` on inputs that
            are not both keyed.
        """
        _check_function(func, (CF.CoProcessFunction, CF.KeyedCoProcessFunction), "ConnectedStreams.process")
        if isinstance(func, CF.KeyedCoProcessFunction):
            if not self._is_keyed():
                raise TypeError(
                    "ConnectedStreams.process got a KeyedCoProcessFunction, which needs keyed "
                    "connected streams: key both inputs first (ConnectedStreams.key_by(ks1, ks2) or "
                    "key_by() on each stream before connect())"
                )
            return self._transform("Keyed Co-Process", KeyedCoProcessOperator(func), output_type)
        if self._is_keyed():
            return self._transform("Co-Process", KeyedCoProcessOperator(func), output_type)
        return self._transform("Co-Process", CoProcessOperator(func), output_type)


class BroadcastStream:
    """A stream whose elements go to every parallel instance of the operator it is connected to,
    with the broadcast state those instances keep (Flink's ``BroadcastStream``). Created by
    ``DataStream.broadcast(*map_state_descriptors)``; only good for ``connect``.

    :param broadcast_partitioned: the input stream under the BROADCAST partitioner.
    :param broadcast_state_descriptors: ``MapStateDescriptor`` s, at least one.
    :raises TypeError, ValueError: for a descriptor that is not a ``MapStateDescriptor``, or none.
    """

    def __init__(self, broadcast_partitioned: DataStream, broadcast_state_descriptors: List[Any]) -> None:
        self._stream = broadcast_partitioned
        self._env = broadcast_partitioned.get_execution_environment()
        self._descriptors = check_broadcast_state_descriptors(broadcast_state_descriptors, "DataStream.broadcast")

    def get_execution_environment(self) -> "StreamExecutionEnvironment":
        return self._env

    def get_transformation(self):
        """The broadcast-partitioned transformation of the input."""
        return self._stream.get_transformation()

    def get_broadcast_state_descriptors(self) -> List[Any]:
        return list(self._descriptors)


class BroadcastConnectedStream:
    """A (keyed or non-keyed) stream connected with a :class:`BroadcastStream` (Flink's
    ``BroadcastConnectedStream``).

    :param non_broadcast_stream: input 1, a ``DataStream`` or ``KeyedStream``.
    :param broadcast_stream: input 2.
    :raises ValueError: if the two belong to different environments.
    """

    def __init__(self, non_broadcast_stream: DataStream, broadcast_stream: BroadcastStream) -> None:
        if not isinstance(non_broadcast_stream, DataStream):
            raise TypeError(f"BroadcastConnectedStream needs a DataStream as input 1, got {non_broadcast_stream!r}")
        if not isinstance(broadcast_stream, BroadcastStream):
            raise TypeError(f"BroadcastConnectedStream needs a BroadcastStream as input 2, got {broadcast_stream!r}")
        if non_broadcast_stream.get_execution_environment() is not broadcast_stream.get_execution_environment():
            raise ValueError("DataStream.connect: both streams must belong to the same environment")
        self.non_broadcast_stream = non_broadcast_stream
        self.broadcast_stream = broadcast_stream
        self._env = non_broadcast_stream.get_execution_environment()

    def get_execution_environment(self) -> "StreamExecutionEnvironment":
        return self._env

    def get_first_input(self) -> DataStream:
        return self.non_broadcast_stream

    def get_second_input(self) -> BroadcastStream:
        return self.broadcast_stream

    def process(self, func: Union[CF.BroadcastProcessFunction, CF.KeyedBroadcastProcessFunction],
                output_type: Any = None) -> DataStream:
        """Run ``func`` over both inputs: a ``KeyedBroadcastProcessFunction`` when input 1 is a
        ``KeyedStream`` (operator ``"Co-Process-Broadcast-Keyed"``), else a
        ``BroadcastProcessFunction`` (operator ``"Co-Process-Broadcast"``).

        :raises TypeError: for another function, or the wrong kind for input 1 (Flink's
            messages).
        """
        _check_function(func, (CF.BroadcastProcessFunction, CF.KeyedBroadcastProcessFunction),
                        "BroadcastConnectedStream.process")
        data = self.non_broadcast_stream
        descriptors = self.broadcast_stream.get_broadcast_state_descriptors()
        keyed = isinstance(data, KeyedStream)
        if isinstance(func, CF.KeyedBroadcastProcessFunction):
            if not keyed:
                raise TypeError(
                    "A KeyedBroadcastProcessFunction can only be used on a keyed stream: key_by() the "
                    "non-broadcast stream before connect()"
                )
            return _two_input(self._env, "Co-Process-Broadcast-Keyed",
                              CoBroadcastWithKeyedOperator(func, descriptors), data.get_transformation(),
                              self.broadcast_stream.get_transformation(), output_type,
                              data._key_selector.get_key, None, data._key_type)
        if keyed:
            raise TypeError(
                "A BroadcastProcessFunction can only be used on a non-keyed stream: use a "
                "KeyedBroadcastProcessFunction after key_by()"
            )
        return _two_input(self._env, "Co-Process-Broadcast", CoBroadcastWithNonKeyedOperator(func, descriptors),
                          data.get_transformation(), self.broadcast_stream.get_transformation(), output_type)
