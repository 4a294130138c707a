"""User function interfaces of two-input operations, with PyFlink's names.

Defined in :mod:`rill.common.co_functions` (below the operators that call them) and re-exported
here, where Rill's API has always exported them.
"""

from rill.common.co_functions import (
    BaseBroadcastProcessFunction,
    BroadcastProcessFunction,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    ProcessJoinFunction,
)

__all__ = [
    "CoMapFunction",
    "CoFlatMapFunction",
    "CoProcessFunction",
    "KeyedCoProcessFunction",
    "BaseBroadcastProcessFunction",
    "BroadcastProcessFunction",
    "KeyedBroadcastProcessFunction",
    "ProcessJoinFunction",
]
