"""The window operator's fast path (Rill; Flink has none): the common case, a non-merging
built-in assigner (tumbling or sliding, event or processing time) with its default trigger
(``EventTimeTrigger`` / ``ProcessingTimeTrigger``) and no evictor, over a reducing,
aggregating or list window state.

Per record, ``process_batch`` does only what the state update needs: the key selector, the
window assignment (inline, with cached window objects, for ``TumblingEventTimeWindows`` and
``SlidingEventTimeWindows``), the key group from the backend's cache, two dict look-ups in the
state table and the reduce / ``add`` call (or a list append). Records one of whose windows has
reached the watermark (late, or firing at once within the allowed lateness), and records in no
window (sliding windows with gaps), take the general path
(:meth:`WindowOperator._process_record`). The watermark is read once per batch: only
``process_watermark`` advances it.

Timers: one pair per (window, key group) instead of one per (window, key). The state table
holds a window's keys per key group (``key_group_maps[g][window] -> {key: state}``), so when
the first key of a key group enters a window, that key registers the window's trigger timer
(``max_timestamp``) and cleanup timer (``max_timestamp + allowed lateness``) in the timer
service, and when one of them fires, every key of the window in that key group fires / is
cleaned up, in the order the keys entered. Timers stay real timers of the ``"window-timers"``
service, partitioned by key group, so snapshots, restore and rescaling need nothing else.

Differences from the general path, both invisible in results: windows that fire at the same
time emit key group by key group (Flink's timer heap also orders equal timestamps by key group;
the general path emits in registration order), and outputs of plain ``reduce`` / ``aggregate``
are buffered while a watermark fires timers and leave in one batch before the watermark.
"""

from __future__ import annotations

from typing import Any, List, Optional

from rill.common.functions import is_rich
from rill.operators.timer_service import InternalTimer
from rill.operators.windowing.assigners import (
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from rill.operators.windowing.triggers import EventTimeTrigger, ProcessingTimeTrigger
from rill.operators.windowing.window_functions import (
    InternalSingleValueWindowFunction,
    InternalWindowFunction,
    PassThroughWindowFunction,
)
from rill.operators.windowing.windows import TimeWindow
from rill.common.streamrecord import MAX_TIMESTAMP
from rill.state.descriptors import AggregatingStateDescriptor, ReducingStateDescriptor

__all__ = ["WindowFastPath"]

#: window objects cached by the tumbling fast path before the cache is cleared
_WINDOW_CACHE_SIZE = 4096

_FAST_ASSIGNERS = (TumblingEventTimeWindows, SlidingEventTimeWindows, TumblingProcessingTimeWindows,
                   SlidingProcessingTimeWindows)

_REDUCE, _AGGREGATE, _LIST = 0, 1, 2


class WindowFastPath:
    """Mixin of :class:`~rill.operators.windowing.window_operator.WindowOperator`: the fast
    path described in the module docstring. ``_fast_kind`` is ``None`` when it does not apply."""

    _fast_kind: Optional[int] = None

    def _setup_fast_path(self) -> None:
        """Decide whether the fast path applies; called at the end of ``open``."""
        self._fast_kind = None
        from rill.operators.windowing.window_operator import WindowOperator  # noqa: PLC0415

        if type(self) is not WindowOperator or type(self.window_assigner) not in _FAST_ASSIGNERS:
            return
        if not hasattr(self._window_state, "table"):  # not the heap backend: no tables to write
            return
        default_trigger = EventTimeTrigger if self._is_event_time else ProcessingTimeTrigger
        if type(self.trigger) is not default_trigger:
            return
        d = self.window_state_descriptor
        if isinstance(d, ReducingStateDescriptor):
            kind = _REDUCE
            self._fast_reduce = d.reduce_callable
        elif isinstance(d, AggregatingStateDescriptor):
            kind = _AGGREGATE
            agg = d.get_agg_function()
            self._fast_add = agg.add
            self._fast_create = agg.create_accumulator
            self._fast_get_result = agg.get_result
        else:
            kind = _LIST
        self._fast_kind = kind
        self._state_maps = self._window_state.table.key_group_maps
        self._sets_key = is_rich(self._incremental_function)
        fn = self.user_function
        #: plain reduce / aggregate: the window's result is the output (buffered per watermark)
        self._pass_through = (kind != _LIST and type(fn) is InternalSingleValueWindowFunction
                              and type(fn.wrapped) is PassThroughWindowFunction)
        #: whether the window function's clear() does something
        self._clears = type(fn).clear is not InternalWindowFunction.clear
        self._tumbling = type(self.window_assigner) is TumblingEventTimeWindows
        #: the inline sliding branch; tests set it to False (after ``open``) to force the
        #: general branch (``assign_windows`` per record) and compare the two
        self._sliding = type(self.window_assigner) is SlidingEventTimeWindows
        #: window objects by start (tumbling and sliding: one size per operator)
        self._window_cache: dict = {}
        #: sliding: a record's windows (tuple, latest first) by its latest window's start, for
        #: records in ceil(size / slide) windows (long) and one fewer (short)
        self._long_windows: dict = {}
        self._short_windows: dict = {}

    # -- timers ----------------------------------------------------------------------------------
    def _register_window_timers(self, key: Any, window: Any) -> None:
        """The first key of a key group in ``window`` registers the window's timers for it."""
        self._backend.set_current_key(key)
        max_ts = window.max_timestamp()
        timers = self._timers
        if self._is_event_time:
            timers.register_event_time_timer(window, max_ts)  # EventTimeTrigger.on_element
            cleanup = self._cleanup_time(window)
            if cleanup != max_ts and cleanup != MAX_TIMESTAMP:
                timers.register_event_time_timer(window, cleanup)
        else:
            timers.register_processing_time_timer(window, max_ts)  # trigger and cleanup timer

    def _on_timer_fast(self, timer: InternalTimer, event_time: bool) -> None:
        """A timer of (window, key group): fire (``EventTimeTrigger`` at
        ``max_timestamp``, ``ProcessingTimeTrigger`` on any processing-time timer) and/or clean
        up every key of the window in the timer's key group. The triggers' ``clear`` would
        only delete timers that have fired already."""
        if event_time != self._is_event_time:
            return  # the default trigger ignores the other time domain; no cleanup either
        window = timer.namespace
        time = timer.timestamp
        offset = self._backend._kg_offset
        by_namespace = self._state_maps[offset]
        by_key = by_namespace.get(window)
        if by_key is None:
            return
        max_ts = window.max_timestamp()
        cleanup = self._cleanup_time(window)
        if time == max_ts or not event_time:
            fire = True
            if time != cleanup:
                # Two timers of one (window, key group) exist only if its keys all left (a
                # reduce returned None) and a new first key came: they fire in the same
                # watermark; fire once.
                token = (window, offset)
                fire = token not in self._fired
                if fire:
                    self._fired.add(token)
            if fire:
                self._fire_keys(window, by_namespace, by_key, max_ts, event_time)
                by_key = by_namespace.get(window)
        if time == cleanup and by_key is not None:
            if self._clears:
                context = self._process_context
                set_key = self._backend.set_current_key
                for key in list(by_key):
                    set_key(key)
                    context.window_ = window
                    self.user_function.clear(window, context)
            by_namespace.pop(window, None)
            self._forget_window(window)

    def _forget_window(self, window: Any) -> None:
        """Drop a cleaned-up window from the caches of window objects (other key groups may
        still hold it: they keep their equal object; a later element of it is late)."""
        cache = self._window_cache
        if not cache:
            return
        start = window[0]
        cache.pop(start, None)
        if self._sliding:
            # the tuples whose oldest window it is (latest start + (n - 1) * slide)
            assigner = self.window_assigner
            slide = assigner.slide
            span = (-(-assigner.size // slide) - 1) * slide
            self._long_windows.pop(start + span, None)
            self._short_windows.pop(start + span - slide, None)

    def _fire_keys(self, window: Any, by_namespace: dict, by_key: dict, max_ts: int, event_time: bool) -> None:
        kind = self._fast_kind
        if self._pass_through and event_time:
            values = self._pending_values
            if kind == _AGGREGATE:
                get_result = self._fast_get_result
                values.extend([get_result(acc) for acc in by_key.values()])
            else:
                values.extend(by_key.values())
            self._pending_timestamps.extend([max_ts] * len(by_key))
            return
        set_key = self._backend.set_current_key
        tc = self._trigger_context
        for key, contents in list(by_key.items()):
            if kind == _AGGREGATE:
                contents = self._fast_get_result(contents)
            set_key(key)
            tc.key = key
            self._emit_window_contents(window, contents)

    # -- elements ------------------------------------------------------------------------------
    def _new_fast_entry(self, by_namespace: dict, by_key: Optional[dict], key: Any, window: Any, value: Any) -> None:
        """Create the (key, window) entry; the first of its key group registers the timers."""
        kind = self._fast_kind
        if kind == _AGGREGATE:
            acc = self._fast_add(value, self._fast_create())
        elif kind == _REDUCE:
            acc = value
        else:
            acc = [value]
        if acc is None:
            return
        if by_key is None:
            by_namespace[window] = {key: acc}
            self._register_window_timers(key, window)
        else:
            by_key[key] = acc

    def _process_batch_fast(self, values: List[Any], timestamps: Optional[List[int]]) -> None:
        if timestamps is None:
            if self._is_event_time:
                for value in values:
                    self._process_record(value, None)  # raises MissingTimestampError
                return
            timestamps = [None] * len(values)
        kind = self._fast_kind
        maps = self._state_maps
        backend = self._backend
        cache = backend.key_group_cache
        key_group_offset = backend.compute_key_group_offset
        key_of = self._key_of
        # rich functions may read keyed state; key selection listeners (TTL cleanup) want
        # every key: then the backend's current key is set per record, as on the general path
        set_key = (backend.set_current_key
                   if self._sets_key or getattr(backend, "_key_selection_listeners", None) else None)
        reduce = self._fast_reduce if kind == _REDUCE else None
        add = self._fast_add if kind == _AGGREGATE else None
        new_entry = self._new_fast_entry
        slow = self._process_record
        if self._tumbling:
            watermark = self._timers.current_watermark()
            size = self.window_assigner.size
            offset = self.window_assigner.offset
            last = size - 1
            window_cache = self._window_cache
            window_start = None
            window = None
            # kinds as literals below: 1 = aggregate, 0 = reduce, 2 = list (see _REDUCE...)
            for value, ts in zip(values, timestamps):
                if ts is None:
                    slow(value, ts)  # raises MissingTimestampError
                start = ts - (ts - offset) % size
                if start + last <= watermark:  # late, or fires at once: the general path
                    slow(value, ts)
                    continue
                key = key_of(value)
                if set_key is not None:
                    set_key(key)
                try:
                    by_namespace = maps[cache[key]]
                except (KeyError, TypeError):  # not cached yet (or unhashable: raises)
                    by_namespace = maps[key_group_offset(key)]
                if start != window_start:  # consecutive records mostly share their window
                    window = window_cache.get(start)
                    if window is None:
                        if len(window_cache) >= _WINDOW_CACHE_SIZE:
                            window_cache.clear()
                        window = window_cache[start] = TimeWindow(start, start + size)
                    window_start = start
                by_key = by_namespace.get(window)
                if by_key is None:
                    new_entry(by_namespace, None, key, window, value)
                    continue
                current = by_key.get(key)
                if current is None:
                    new_entry(by_namespace, by_key, key, window, value)
                    continue
                if kind == 1:
                    acc = add(value, current)
                elif kind == 0:
                    acc = reduce(current, value)
                else:
                    current.append(value)
                    continue
                if acc is not None:
                    by_key[key] = acc
                else:
                    del by_key[key]
                    if not by_key:
                        del by_namespace[window]
            return
        if self._sliding:
            self._process_sliding(values, timestamps, set_key)
            return
        event_time = self._is_event_time
        assign = self._assign
        assigner_context = self._assigner_context
        watermark = self._timers.current_watermark()  # constant within a batch
        for value, ts in zip(values, timestamps):
            windows = assign(value, ts, assigner_context)
            if event_time:
                # late, fires at once, or in no window (late or not: the general path decides)
                if not windows or any(window[1] - 1 <= watermark for window in windows):
                    slow(value, ts)
                    continue
            key = key_of(value)
            if set_key is not None:
                set_key(key)
            try:
                by_namespace = maps[cache[key]]
            except (KeyError, TypeError):
                by_namespace = maps[key_group_offset(key)]
            for window in windows:
                by_key = by_namespace.get(window)
                current = None if by_key is None else by_key.get(key)
                if current is None:
                    new_entry(by_namespace, by_key, key, window, value)
                    continue
                if kind == _AGGREGATE:
                    acc = add(value, current)
                elif kind == _REDUCE:
                    acc = reduce(current, value)
                else:
                    current.append(value)
                    continue
                if acc is not None:
                    by_key[key] = acc
                else:
                    del by_key[key]
                    if not by_key:
                        del by_namespace[window]

    def _sliding_windows(self, start: int, n: int) -> tuple:
        """The ``n`` windows whose latest starts at ``start``, latest first (as
        ``SlidingEventTimeWindows.assign_windows``), from the cache of window objects."""
        assigner = self.window_assigner
        size, slide = assigner.size, assigner.slide
        window_cache = self._window_cache
        windows = []
        for _ in range(n):
            window = window_cache.get(start)
            if window is None:
                if len(window_cache) >= _WINDOW_CACHE_SIZE:
                    window_cache.clear()
                window = window_cache[start] = TimeWindow(start, start + size)
            windows.append(window)
            start -= slide
        return tuple(windows)

    def _process_sliding(self, values: List[Any], timestamps: List[int], set_key: Any) -> None:
        """The inline branch for ``SlidingEventTimeWindows``: the general branch's results
        without ``assign_windows`` per record.

        A record with timestamp ``ts`` belongs to the windows starting at
        ``last = ts - (ts - offset) % slide`` (Flink's ``getWindowStartWithOffset``; Python's
        ``%`` is non-negative, so negative timestamps need no correction) and down by
        ``slide`` while ``start > ts - size``: with ``r = ts - last`` in ``[0, slide)``, that
        is ``n_max = ceil(size / slide)`` windows if ``r < threshold = size - (n_max - 1) *
        slide``, else ``n_max - 1`` (possibly none, when ``size < slide``).

        The record takes the general path if one of its windows has reached the watermark
        (``max_timestamp <= watermark``: late, or fires at once within the allowed lateness),
        i.e. if its oldest window has: ``last - (n - 1) * slide + size - 1 <= watermark``.
        The watermark is read once: only ``process_watermark`` advances it, never a record
        (neither the general path per record nor the user functions and outputs it calls).
        """
        kind = self._fast_kind
        maps = self._state_maps
        backend = self._backend
        cache = backend.key_group_cache
        key_group_offset = backend.compute_key_group_offset
        key_of = self._key_of
        reduce = self._fast_reduce if kind == _REDUCE else None
        add = self._fast_add if kind == _AGGREGATE else None
        new_entry = self._new_fast_entry
        slow = self._process_record
        assigner = self.window_assigner
        size, slide, offset = assigner.size, assigner.slide, assigner.offset
        n_max = -(-size // slide)
        threshold = size - (n_max - 1) * slide
        # general path iff last <= limit (long: n_max windows; short: n_max - 1 windows)
        watermark = self._timers.current_watermark()
        limit_long = watermark - size + 1 + (n_max - 1) * slide
        has_short = n_max > 1  # else a record with r >= threshold has no window
        limit_short = limit_long - slide
        long_windows = self._long_windows
        short_windows = self._short_windows
        make_windows = self._sliding_windows
        for value, ts in zip(values, timestamps):
            if ts is None:
                slow(value, ts)  # raises MissingTimestampError
            r = (ts - offset) % slide
            last = ts - r
            if r < threshold:
                if last <= limit_long:
                    slow(value, ts)
                    continue
                windows = long_windows.get(last)
                if windows is None:
                    if len(long_windows) >= _WINDOW_CACHE_SIZE:
                        long_windows.clear()
                    windows = long_windows[last] = make_windows(last, n_max)
            else:
                if not has_short or last <= limit_short:
                    slow(value, ts)  # late, fires at once, or in no window (gap)
                    continue
                windows = short_windows.get(last)
                if windows is None:
                    if len(short_windows) >= _WINDOW_CACHE_SIZE:
                        short_windows.clear()
                    windows = short_windows[last] = make_windows(last, n_max - 1)
            key = key_of(value)
            if set_key is not None:
                set_key(key)
            try:
                by_namespace = maps[cache[key]]
            except (KeyError, TypeError):  # not cached yet (or unhashable: raises)
                by_namespace = maps[key_group_offset(key)]
            for window in windows:
                by_key = by_namespace.get(window)
                if by_key is None:
                    new_entry(by_namespace, None, key, window, value)
                    continue
                current = by_key.get(key)
                if current is None:
                    new_entry(by_namespace, by_key, key, window, value)
                    continue
                if kind == 1:  # _AGGREGATE
                    acc = add(value, current)
                elif kind == 0:  # _REDUCE
                    acc = reduce(current, value)
                else:
                    current.append(value)
                    continue
                if acc is not None:
                    by_key[key] = acc
                else:
                    del by_key[key]
                    if not by_key:
                        del by_namespace[window]
