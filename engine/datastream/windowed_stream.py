"""``WindowedStream`` and ``AllWindowedStream``: windows on a keyed / non-keyed stream, with
PyFlink's methods (``pyflink.datastream.data_stream.WindowedStream`` /
``AllWindowedStream``) plus Flink's ``evictor`` and ``sum/min/max/min_by/max_by``.

Settings (``trigger``, ``evictor``, ``allowed_lateness``, ``side_output_late_data``) return
the windowed stream; a function call (``reduce``, ``aggregate``, ``process``, ``apply``,
``sum``...) adds the window operator (built by
:class:`~rill.operators.windowing.builder.WindowOperatorBuilder`) as a one-input
transformation and returns its ``DataStream``; ``get_side_output(tag)`` on that stream reads the
late data. Bad settings fail here, when the graph is built.

``window_all`` keys the stream by a constant (:class:`NullByteKeySelector`, as Flink) and
forces the window operator's parallelism and max parallelism to 1 (Flink's
``forceNonParallel``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Union

from rill.datastream import functions as F
from rill.operators.aggregations import (
    MaxAggregator,
    MaxByAggregator,
    MinAggregator,
    MinByAggregator,
    SumAggregator,
)
from rill.operators.output_tag import OutputTag
from rill.operators.windowing.assigners import GlobalWindows, WindowAssigner
from rill.operators.windowing.builder import WindowOperatorBuilder
from rill.operators.windowing.evictors import CountEvictor, Evictor
from rill.operators.windowing.triggers import CountTrigger, PurgingTrigger, Trigger

if TYPE_CHECKING:  # pragma: no cover
    from rill.datastream.data_stream import DataStream, KeyedStream

__all__ = [
    "WindowedStream",
    "AllWindowedStream",
    "NullByteKeySelector",
    "count_window",
    "count_window_all",
]


class NullByteKeySelector(F.KeySelector):
    """Keys every record by ``0`` (Flink's ``NullByteKeySelector``): how ``window_all`` runs on
    the keyed window operator."""

    def get_key(self, value: Any) -> int:
        """``0`` for every record."""
        return 0


class _WindowedStreamBase:
    _api = "WindowedStream"
    _non_keyed = False

    def __init__(self, keyed_stream: "KeyedStream", window_assigner: WindowAssigner) -> None:
        self._keyed_stream = keyed_stream
        self._builder = WindowOperatorBuilder(window_assigner, non_keyed=self._non_keyed, api=self._api)
        # PyFlink passes the environment to get_default_trigger
        self._builder.trigger = window_assigner.get_default_trigger(keyed_stream.get_execution_environment())
        self._window_assigner = window_assigner

    # -- introspection -----------------------------------------------------------------------
    def get_execution_environment(self):
        return self._keyed_stream.get_execution_environment()

    def get_input_type(self):
        return self._keyed_stream.get_type()

    def get_window_assigner(self) -> WindowAssigner:
        return self._window_assigner

    # -- settings ------------------------------------------------------------------------------
    def trigger(self, trigger: Trigger):
        """Use ``trigger`` instead of the assigner's default.

        :raises TypeError: for a non-Trigger.
        :raises ValueError: for a merging (session) assigner with a trigger whose
            ``can_merge()`` is false.
        """
        self._builder.set_trigger(trigger)
        return self

    def evictor(self, evictor: Evictor):
        """Evict elements before / after the function (all elements are then kept in state).

        :raises TypeError: for a non-Evictor.
        """
        self._builder.set_evictor(evictor)
        return self

    def allowed_lateness(self, time_ms: Any):
        """Keep event-time windows ``time_ms`` ms (int, timedelta or ``to_milliseconds()``)
        after their end; later elements re-fire them (default 0).

        :raises ValueError: if negative; :raises TypeError: for a non-duration.
        """
        self._builder.set_allowed_lateness(time_ms)
        return self

    def side_output_late_data(self, output_tag: OutputTag):
        """Send elements that arrive after ``window end + allowed lateness`` to ``output_tag``
        (read with ``result.get_side_output(output_tag)``), instead of dropping them.

        :raises TypeError: for a non-OutputTag.
        """
        self._builder.set_late_data_output_tag(output_tag)
        return self

    # -- functions -----------------------------------------------------------------------------
    def _transform(self, built, output_type) -> "DataStream":
        operator, name = built
        return self._keyed_stream._one_input(name, operator, output_type, self._keyed_stream)

    def reduce(self, reduce_function: Union[F.ReduceFunction, Any], window_function: Any = None,
               output_type: Any = None) -> "DataStream":
        """Incremental reduce per window (the state keeps one value); with
        ``window_function`` (a window or process window function) the reduced value is passed
        to it on firing. Outputs carry the window's max timestamp.

        :raises TypeError: for a bad function.
        """
        if output_type is None and window_function is None:
            output_type = self._keyed_stream.get_type()
        return self._transform(self._builder.reduce(reduce_function, window_function, self.get_input_type()), output_type)

    def aggregate(self, aggregate_function: F.AggregateFunction, window_function: Any = None,
                  accumulator_type: Any = None, output_type: Any = None) -> "DataStream":
        """Incremental aggregation per window (the state keeps the accumulator); with
        ``window_function`` its result is passed to it on firing.

        :raises TypeError: for a bad function; :raises ValueError: for session windows with an
            AggregateFunction without ``merge``.
        """
        return self._transform(self._builder.aggregate(aggregate_function, window_function, accumulator_type),
                               output_type)

    def process(self, process_window_function: Any, output_type: Any = None) -> "DataStream":
        """A process window function over all of the window's elements (kept in state).

        :raises TypeError: for a bad function.
        """
        return self._transform(self._builder.process(process_window_function), output_type)

    def apply(self, window_function: Any, output_type: Any = None) -> "DataStream":
        """A window function over all of the window's elements (kept in state).

        :raises TypeError: for a bad function.
        """
        return self._transform(self._builder.apply(window_function), output_type)

    def _aggregation(self, aggregator: F.ReduceFunction) -> "DataStream":
        return self.reduce(aggregator)

    def sum(self, position_to_sum: Union[int, str] = 0) -> "DataStream":
        """Per window, the first record with field ``position_to_sum`` summed (Flink's
        ``WindowedStream.sum``; see :mod:`rill.operators.aggregations`)."""
        return self._aggregation(SumAggregator(position_to_sum))

    def min(self, position_to_min: Union[int, str] = 0) -> "DataStream":
        """Per window, the first record with field ``position_to_min`` the minimum."""
        return self._aggregation(MinAggregator(position_to_min))

    def max(self, position_to_max: Union[int, str] = 0) -> "DataStream":
        """Per window, the first record with field ``position_to_max`` the maximum."""
        return self._aggregation(MaxAggregator(position_to_max))

    def min_by(self, position_to_min_by: Union[int, str] = 0, first: bool = True) -> "DataStream":
        """Per window, the record with the smallest field (the first one on ties, unless
        ``first=False``)."""
        return self._aggregation(MinByAggregator(position_to_min_by, first))

    def max_by(self, position_to_max_by: Union[int, str] = 0, first: bool = True) -> "DataStream":
        """Per window, the record with the largest field (the first one on ties, unless
        ``first=False``)."""
        return self._aggregation(MaxByAggregator(position_to_max_by, first))


class WindowedStream(_WindowedStreamBase):
    """Windows on a keyed stream (PyFlink's ``WindowedStream``): ``key_by(...).window(assigner)``.

    :param keyed_stream: the ``KeyedStream``.
    :param window_assigner: a ``WindowAssigner``.
    :raises TypeError: if ``window_assigner`` is not a ``WindowAssigner``.
    """

    def __init__(self, keyed_stream: "KeyedStream", window_assigner: WindowAssigner) -> None:
        if not isinstance(window_assigner, WindowAssigner):
            raise TypeError(
                f"KeyedStream.window needs a WindowAssigner (e.g. TumblingEventTimeWindows.of(5000)), got "
                f"{window_assigner!r} of type {type(window_assigner).__name__}"
            )
        super().__init__(keyed_stream, window_assigner)


class AllWindowedStream(_WindowedStreamBase):
    """Windows over a whole (non-keyed) stream (PyFlink's ``AllWindowedStream``):
    ``data_stream.window_all(assigner)``. Functions are ``AllWindowFunction`` /
    ``ProcessAllWindowFunction`` (or callables ``(window, inputs)``); the window operator runs
    with parallelism 1.

    :param data_stream: the ``DataStream``.
    :param window_assigner: a ``WindowAssigner``.
    :raises TypeError: if ``window_assigner`` is not a ``WindowAssigner``.
    """

    _api = "AllWindowedStream"
    _non_keyed = True

    def __init__(self, data_stream: "DataStream", window_assigner: WindowAssigner) -> None:
        if not isinstance(window_assigner, WindowAssigner):
            raise TypeError(
                f"DataStream.window_all needs a WindowAssigner (e.g. TumblingEventTimeWindows.of(5000)), got "
                f"{window_assigner!r} of type {type(window_assigner).__name__}"
            )
        self._data_stream = data_stream
        super().__init__(data_stream.key_by(NullByteKeySelector()), window_assigner)

    def _transform(self, built, output_type) -> "DataStream":
        stream = super()._transform(built, output_type)
        t = stream.get_transformation()
        t.set_parallelism(1)
        t.set_max_parallelism(1)
        t.non_parallel = True  # Flink's forceNonParallel
        return stream


def _count_window_spec(stream: _WindowedStreamBase, size: int, slide: Optional[int], owner: str) -> _WindowedStreamBase:
    if type(size) is not int or size < 1:
        raise ValueError(f"{owner}: the window size must be an int >= 1 (elements), got {size!r}")
    if slide is None or slide == 0:  # PyFlink's default slide is 0: tumbling
        return stream.trigger(PurgingTrigger.of(CountTrigger.of(size)))
    if type(slide) is not int or slide < 1:
        raise ValueError(f"{owner}: the slide must be an int >= 1 (elements), got {slide!r}")
    return stream.evictor(CountEvictor.of(size)).trigger(CountTrigger.of(slide))


def count_window(keyed_stream: "KeyedStream", size: int, slide: Optional[int] = None) -> WindowedStream:
    """``KeyedStream.count_window(size, slide)`` (Flink's ``countWindow``): windows of the last
    ``size`` elements of each key.

    - tumbling (``slide`` ``None`` or 0): ``GlobalWindows`` + ``PurgingTrigger(CountTrigger(size))``;
      fires every ``size`` elements and starts afresh;
    - sliding: ``GlobalWindows`` + ``CountEvictor(size)`` + ``CountTrigger(slide)``: fires every
      ``slide`` elements over the last ``size``.

    Rill difference from PyFlink (whose count windows use ``CountWindow`` ids): the windows are
    ``GlobalWindow`` as in Flink's Java API; outputs carry ``MAX_TIMESTAMP``.

    :raises ValueError: unless ``size >= 1`` and ``slide`` is ``None``, 0 or ``>= 1``.
    """
    return _count_window_spec(WindowedStream(keyed_stream, GlobalWindows.create()), size, slide,
                              "KeyedStream.count_window")


def count_window_all(data_stream: "DataStream", size: int, slide: Optional[int] = None) -> AllWindowedStream:
    """``DataStream.count_window_all(size, slide)``: :func:`count_window` over the whole stream
    (parallelism 1).

    :raises ValueError: as :func:`count_window`.
    """
    return _count_window_spec(AllWindowedStream(data_stream, GlobalWindows.create()), size, slide,
                              "DataStream.count_window_all")
