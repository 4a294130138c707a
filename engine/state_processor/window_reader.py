"""``SavepointReader.window(assigner)``: a window operator's windows as a DataFrame (Flink's
``WindowSavepointReader``): ``aggregate``, ``reduce`` or ``process`` as the operator was built,
each with an optional :class:`~rill.state_processor.functions.WindowReaderFunction`.

Timers: the window fast path of tumbling and sliding windows keeps one timer pair per window
and key group (``rill.operators.windowing.fast_path``), so ``registered_*_timers`` shows them
only for the key that registered them; the general path keeps them per key and window.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Union

from rill.operators.windowing.assigners import MergingWindowAssigner, WindowAssigner
from rill.state_processor.function_readers import WINDOW_CONTENTS, read_windows
from rill.state_processor.functions import WindowReaderFunction
from rill.state_processor.snapshots import OperatorIdentifier, find_operator, keyed_state_descriptions

__all__ = ["WindowReader"]

#: The kind of ``"window-contents"`` each method reads (what the operator's builder made).
_KINDS = {"aggregate": "AGGREGATING", "reduce": "REDUCING", "process": "LIST"}


class WindowReader:
    """Reads the windows of one window operator (Flink's ``WindowSavepointReader``); made by
    :meth:`~rill.state_processor.SavepointReader.window`.

    :param reader: the :class:`~rill.state_processor.SavepointReader`.
    :param assigner: the operator's window assigner (a merging one, e.g. session windows, maps
        state windows back to their windows).
    :raises TypeError: if ``assigner`` is not a ``WindowAssigner``.
    """

    def __init__(self, reader: Any, assigner: WindowAssigner) -> None:
        if not isinstance(assigner, WindowAssigner):
            raise TypeError(f"SavepointReader.window expects a WindowAssigner, got {assigner!r}")
        self._reader = reader
        self._merging = isinstance(assigner, MergingWindowAssigner)

    def evictor(self) -> Any:
        """Flink's reader of evicting windows (their contents are ``TimestampedValue`` s):
        not built.

        :raises NotImplementedError: always (read an evicting window's elements with
            :meth:`process`, which gives the stored ``TimestampedValue`` s)."""
        raise NotImplementedError("WindowReader.evictor(): the reader of evicting windows is not built; "
                                  "process() gives their stored TimestampedValue elements")

    def aggregate(self, uid: Union[str, OperatorIdentifier], aggregate_function: Any,
                  reader_function: Optional[WindowReaderFunction] = None, output_type: Any = None) -> Any:
        """One row per key and window of a ``.aggregate(aggregate_function)`` window: the
        accumulator's ``get_result`` (passed to ``reader_function`` when given).

        :raises ValueError: without ``output_type``, or if the window is not an ``aggregate``
            one (its state is of another kind).
        :raises KeyError: if the operator is not in the snapshot or is not a window operator.
        """
        return self._read(uid, lambda acc: [aggregate_function.get_result(acc)], reader_function, output_type,
                          "aggregate")

    def reduce(self, uid: Union[str, OperatorIdentifier], reduce_function: Any,
               reader_function: Optional[WindowReaderFunction] = None, output_type: Any = None) -> Any:
        """One row per key and window of a ``.reduce(reduce_function)`` window: the reduced
        value (passed to ``reader_function`` when given). ``reduce_function`` is the job's
        (Flink requires it; the stored value is already reduced).

        :raises ValueError, KeyError: as :meth:`aggregate`.
        """
        return self._read(uid, lambda value: [value], reader_function, output_type, "reduce")

    def process(self, uid: Union[str, OperatorIdentifier], reader_function: WindowReaderFunction,
                output_type: Any = None) -> Any:
        """The outputs of ``reader_function`` over every key and window of a window that keeps
        its elements (``process`` / ``apply``), given all of them.

        :raises TypeError: if ``reader_function`` is not a ``WindowReaderFunction``.
        :raises ValueError, KeyError: as :meth:`aggregate`.
        """
        if not isinstance(reader_function, WindowReaderFunction):
            raise TypeError(f"WindowReader.process expects a WindowReaderFunction, got {reader_function!r}")
        return self._read(uid, lambda elements: list(elements), reader_function, output_type, "process")

    def _read(self, uid: Any, contents: Callable[[Any], List[Any]], function: Optional[WindowReaderFunction],
              output_type: Any, method: str) -> Any:
        if function is not None and not isinstance(function, WindowReaderFunction):
            raise TypeError(f"WindowReader.{method} expects a WindowReaderFunction, got {function!r}")
        states = keyed_state_descriptions(find_operator(self._reader.metadata, uid))
        if WINDOW_CONTENTS not in states:
            raise KeyError(f"WindowReader.{method}({OperatorIdentifier.of(uid)}): the operator has no window "
                           f"state {WINDOW_CONTENTS!r} (keyed states: {sorted(states)}): is it a window operator?")
        kind = states[WINDOW_CONTENTS]["kind"]
        if kind != _KINDS[method]:
            right = [m for m, k in _KINDS.items() if k == kind]
            raise ValueError(f"WindowReader.{method}({OperatorIdentifier.of(uid)}): the window keeps a {kind} "
                             f"state; read it with {right[0] if right else 'rill-state'}")
        merging = self._merging
        return self._reader._run_keyed(uid, lambda split: read_windows(split, contents, function, merging),
                                       output_type, f"WindowReader.{method}")
