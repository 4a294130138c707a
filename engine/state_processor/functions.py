"""The user functions of a state read (Flink's ``org.apache.flink.state.api.functions``):
:class:`KeyedStateReaderFunction` for an operator's keyed state, key by key, and
:class:`WindowReaderFunction` for a window operator's windows.

Output: call ``out.collect(value)`` (Flink's ``Collector``) or return / yield the values
(PyFlink's style); both may be mixed.
"""

from __future__ import annotations

import abc
from typing import Any, Iterable, Optional, Set

from rill.common.functions import Function

__all__ = ["KeyedStateReaderFunction", "WindowReaderFunction"]


class KeyedStateReaderFunction(Function):
    """Reads an operator's keyed state one key at a time (Flink's ``KeyedStateReaderFunction``).

    ``open(runtime_context)`` registers every state it reads with
    ``runtime_context.get_state(descriptor)`` (``get_list_state``, ``get_map_state``,
    ``get_reducing_state``, ``get_aggregating_state``): registering later raises
    ``RuntimeError``, as Flink's. Then ``read_key`` is called once per key that has an entry
    in a registered state (key group by key group), with those states bound to that key.
    """

    class Context(abc.ABC):
        """What ``read_key`` sees besides the states (Flink's ``KeyedStateReaderFunction.Context``)."""

        @abc.abstractmethod
        def registered_event_time_timers(self) -> Set[int]:
            """Timestamps (epoch ms) of the key's event-time timers of the operator's user
            timer service (``"user-timers"``, a ``KeyedProcessFunction``'s)."""

        @abc.abstractmethod
        def registered_processing_time_timers(self) -> Set[int]:
            """Timestamps (epoch ms) of the key's processing-time timers."""

    @abc.abstractmethod
    def read_key(self, key: Any, context: "KeyedStateReaderFunction.Context", out: Any) -> Optional[Iterable[Any]]:
        """Emit the outputs of ``key`` (``out.collect(value)``, or return / yield them)."""


class WindowReaderFunction(Function):
    """Reads one window of a window operator (Flink's ``WindowReaderFunction``):
    ``read_window(key, context, elements, out)`` per key and window, with the window's
    contents: the aggregate's result (``aggregate``), the reduced value (``reduce``) or every
    element (``process``)."""

    class Context(abc.ABC):
        """The window and its timers (Flink's ``WindowReaderFunction.Context``)."""

        @abc.abstractmethod
        def window(self) -> Any:
            """The window (a ``TimeWindow``, ``CountWindow``, ``GlobalWindow``); for merging
            (session) windows the merged window, not the state window."""

        @abc.abstractmethod
        def registered_event_time_timers(self) -> Set[int]:
            """Timestamps (epoch ms) of the event-time timers of this key and window in the
            ``"window-timers"`` service."""

        @abc.abstractmethod
        def registered_processing_time_timers(self) -> Set[int]:
            """Timestamps (epoch ms) of the processing-time timers of this key and window."""

        def window_state(self) -> Any:
            """Flink's per-window keyed state store: not built.

            :raises NotImplementedError: always (reading a ``ProcessWindowFunction``'s
                per-window state is not built in Rill's reader)."""
            raise NotImplementedError("WindowReaderFunction.Context.window_state: reading per-window "
                                      "state is not built; read the state with rill-state instead")

        def global_state(self) -> Any:
            """Flink's per-key keyed state store: not built.

            :raises NotImplementedError: always."""
            raise NotImplementedError("WindowReaderFunction.Context.global_state: reading a window "
                                      "function's global state is not built; read it with rill-state")

    @abc.abstractmethod
    def read_window(self, key: Any, context: "WindowReaderFunction.Context", elements: Iterable[Any],
                    out: Any) -> Optional[Iterable[Any]]:
        """Emit the outputs of one window (``out.collect(value)``, or return / yield them)."""
