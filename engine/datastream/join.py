"""The interval join API: ``KeyedStream.interval_join(other)`` → :class:`IntervalJoin`
→ ``.between(lower, upper)`` → :class:`IntervalJoined` → ``.process(ProcessJoinFunction)``
(Flink's ``KeyedStream.IntervalJoin`` and ``KeyedStream.IntervalJoined``).

::

    orders.key_by(lambda o: o.user).interval_join(clicks.key_by(lambda c: c.user)) \\
        .between(-5_000, 0) \\
        .upper_bound_exclusive() \\
        .process(MyJoin())

joins each order at ``t`` with the clicks of the same user at ``t - 5000 <= t_click < t``. Bounds
are ms (an ``int``, a ``datetime.timedelta`` or a PyFlink ``Time``/``Duration``), inclusive by
default. The join runs in event time: both inputs need timestamps and watermarks (see
:mod:`rill.operators.interval_join` for buffering, cleanup, late elements and output timestamps).
"""

from __future__ import annotations

from typing import Any, Optional

from rill.datastream import co_functions as CF
from rill.datastream.data_stream import DataStream, KeyedStream
from rill.operators.interval_join import IntervalJoinOperator, to_milliseconds
from rill.operators.output_tag import OutputTag

__all__ = ["IntervalJoin", "IntervalJoined"]


class IntervalJoin:
    """Two keyed streams about to be interval-joined (Flink's ``KeyedStream.IntervalJoin``).

    :param left: the ``KeyedStream`` that ``interval_join`` was called on (input 1).
    :param right: the other ``KeyedStream`` (input 2).
    :raises TypeError: if either is not a ``KeyedStream``.
    :raises ValueError: if they belong to different environments.
    """

    def __init__(self, left: KeyedStream, right: KeyedStream) -> None:
        for what, s in (("left", left), ("right", right)):
            if not isinstance(s, KeyedStream):
                raise TypeError(
                    f"An interval join needs two KeyedStreams: key_by() the {what} stream first, got "
                    f"{type(s).__name__}"
                )
        if left.get_execution_environment() is not right.get_execution_environment():
            raise ValueError("KeyedStream.interval_join: both streams must belong to the same environment")
        self._left = left
        self._right = right

    def between(self, lower_bound: Any, upper_bound: Any) -> "IntervalJoined":
        """Join a left element at ``t`` with right elements at ``t + lower_bound <= t_r <=
        t + upper_bound``.

        :raises TypeError: if a bound is not ms (int), a ``timedelta`` or a ``Time``/``Duration``.
        :raises ValueError: if ``lower_bound > upper_bound`` (Flink's message).
        """
        lower = to_milliseconds(lower_bound, "IntervalJoin.between: lower_bound")
        upper = to_milliseconds(upper_bound, "IntervalJoin.between: upper_bound")
        if lower > upper:
            raise ValueError(
                f"lowerBound <= upperBound must be fulfilled, got lower bound {lower} ms and upper "
                f"bound {upper} ms"
            )
        return IntervalJoined(self._left, self._right, lower, upper)


class IntervalJoined:
    """A configured interval join (Flink's ``KeyedStream.IntervalJoined``).

    :param left: input 1 (``KeyedStream``).
    :param right: input 2 (``KeyedStream``).
    :param lower_bound: ms.
    :param upper_bound: ms.
    """

    def __init__(self, left: KeyedStream, right: KeyedStream, lower_bound: int, upper_bound: int) -> None:
        self._left = left
        self._right = right
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        self.lower_bound_inclusive = True
        self.upper_bound_inclusive = True
        self._left_late_tag: Optional[OutputTag] = None
        self._right_late_tag: Optional[OutputTag] = None

    def lower_bound_exclusive(self) -> "IntervalJoined":
        """Make the lower bound exclusive (``t_r > t + lower_bound``)."""
        self.lower_bound_inclusive = False
        return self

    def upper_bound_exclusive(self) -> "IntervalJoined":
        """Make the upper bound exclusive (``t_r < t + upper_bound``)."""
        self.upper_bound_inclusive = False
        return self

    def side_output_left_late_data(self, output_tag: OutputTag) -> "IntervalJoined":
        """Send late left elements to ``output_tag`` instead of dropping them (Flink's
        ``sideOutputLeftLateData``); read them with ``get_side_output`` on the join's result.

        :raises TypeError: unless ``output_tag`` is an ``OutputTag``.
        """
        self._left_late_tag = _check_tag(output_tag)
        return self

    def side_output_right_late_data(self, output_tag: OutputTag) -> "IntervalJoined":
        """As :meth:`side_output_left_late_data`, for late right elements."""
        self._right_late_tag = _check_tag(output_tag)
        return self

    def process(self, func: CF.ProcessJoinFunction, output_type: Any = None) -> DataStream:
        """The joined stream: what ``func.process_element(left, right, ctx)`` yields for each
        pair (operator ``"Interval Join"``), each output at ``max(t_left, t_right)``.

        :raises TypeError: unless ``func`` is a ``ProcessJoinFunction``.
        :raises ValueError: if the key types of the two streams are given and differ.
        """
        from rill.datastream.connected_streams import _two_input  # noqa: PLC0415
        if not isinstance(func, CF.ProcessJoinFunction):
            raise TypeError(
                f"IntervalJoined.process expects a ProcessJoinFunction, got {func!r} of type {type(func).__name__}"
            )
        left, right = self._left, self._right
        t1, t2 = left._key_type, right._key_type
        if t1 is not None and t2 is not None and t1 != t2:
            raise ValueError(f"Key types of the interval-joined KeyedStreams don't match: {t1!r} and {t2!r}")
        operator = IntervalJoinOperator(self.lower_bound, self.upper_bound, self.lower_bound_inclusive,
                                        self.upper_bound_inclusive, func, self._left_late_tag, self._right_late_tag)
        return _two_input(left.get_execution_environment(), "Interval Join", operator, left.get_transformation(),
                          right.get_transformation(), output_type, left._key_selector.get_key,
                          right._key_selector.get_key, t1 if t1 is not None else t2)


def _check_tag(output_tag: Any) -> OutputTag:
    if not isinstance(output_tag, OutputTag):
        raise TypeError(f"A late data side output needs an OutputTag, got {output_tag!r}")
    return output_tag
