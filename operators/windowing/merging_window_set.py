"""``MergingWindowSet``: the in-flight windows of one key of a merging (session) window
operator, and the state window of each (Flink's
``org.apache.flink.streaming.runtime.operators.windowing.MergingWindowSet``).

When windows merge, the merged window's contents are not moved to a new namespace: the merge
result takes over the *state window* of one of the merged windows (the first in start order;
Flink takes any) and the other state windows are merged into it (``merge_namespaces``). The
mapping ``window -> state window`` is kept in a keyed ``ListState`` of ``(window,
state_window)`` pairs (Flink's ``"merging-window-set"`` of ``Tuple2``), read when the set is
created and written back by :meth:`persist` only if it changed.

Example: windows ``[1, 4)`` and ``[5, 8)`` are in flight with state windows ``[1, 4)`` and
``[5, 8)``; an element opens ``[3, 6)``, which touches both: the merge result ``[1, 8)`` maps
to state window ``[1, 4)``, and the state of ``[5, 8)`` is merged into ``[1, 4)``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

__all__ = ["MergingWindowSet", "MergeFunction"]

#: ``merge(merge_result, merged_windows, state_window_result, merged_state_windows)``
MergeFunction = Callable[[Any, List[Any], Any, List[Any]], None]


class MergingWindowSet:
    """The in-flight windows of the current key.

    :param window_assigner: a ``MergingWindowAssigner`` (its ``merge_windows`` decides what
        merges).
    :param state: the key's ``ListState`` of ``(window, state_window)`` pairs.
    """

    __slots__ = ("window_assigner", "state", "mapping", "_initial")

    def __init__(self, window_assigner: Any, state: Any) -> None:
        self.window_assigner = window_assigner
        self.state = state
        self.mapping: Dict[Any, Any] = dict(state.get())
        self._initial = dict(self.mapping)

    def persist(self) -> None:
        """Write the mapping back to the state if it changed (empty: the entry is removed)."""
        if self.mapping != self._initial:
            if self.mapping:
                self.state.update(list(self.mapping.items()))
            else:
                self.state.clear()
            self._initial = dict(self.mapping)

    def get_state_window(self, window: Any) -> Optional[Any]:
        """The state window (namespace of the contents) of in-flight ``window``, or ``None``."""
        return self.mapping.get(window)

    def retire_window(self, window: Any) -> None:
        """Remove ``window`` from the in-flight windows (it was purged or is late).

        :raises RuntimeError: if ``window`` is not in flight (Flink's IllegalStateException).
        """
        if self.mapping.pop(window, None) is None:
            raise RuntimeError(f"Window {window} is not in in-flight window set.")

    def add_window(self, new_window: Any, merge_function: MergeFunction) -> Any:
        """Add ``new_window``, merging it with in-flight windows as the assigner decides, and
        return the window it ends up in (``new_window`` itself when nothing merged).

        For every merge (also of windows that the new one bridges) ``merge_function`` is
        called with the merge result, the previously in-flight windows that merged (without
        ``new_window``, which has no state yet), the state window of the result and the
        state windows to merge into it. It is not called when ``new_window`` only falls into
        an existing window without extending it.
        """
        if new_window in self.mapping:
            # Rill difference: Flink maps an in-flight window that is added again to itself,
            # losing its state window (possible with dynamic gaps); in-flight windows never
            # overlap, so nothing can merge: it stays as it is.
            return new_window
        windows = list(self.mapping)
        windows.append(new_window)
        merge_results: List[Any] = []

        def on_merge(to_be_merged, merge_result) -> None:
            merge_results.append((merge_result, list(to_be_merged)))

        self.window_assigner.merge_windows(windows, on_merge)

        result_window = new_window
        merged_new_window = False
        mapping = self.mapping
        for merge_result, merged_windows in merge_results:
            if new_window in merged_windows:
                merged_windows.remove(new_window)
                merged_new_window = True
                result_window = merge_result
            # the state window of the first merged window becomes the result's state window
            merged_state_window = mapping[merged_windows[0]]
            merged_state_windows = []
            for merged in merged_windows:
                state_window = mapping.pop(merged, None)
                if state_window is not None:
                    merged_state_windows.append(state_window)
            mapping[merge_result] = merged_state_window
            # the target state window is not merged into itself
            merged_state_windows = [w for w in merged_state_windows if w != merged_state_window]
            # a new window that falls into one existing window without extending it merges nothing
            if not (len(merged_windows) == 1 and merged_windows[0] == merge_result):
                merge_function(merge_result, merged_windows, merged_state_window, merged_state_windows)

        if not merge_results or (result_window == new_window and not merged_new_window):
            mapping[result_window] = result_window
        return result_window

    def __repr__(self) -> str:
        return f"MergingWindowSet({self.mapping})"
