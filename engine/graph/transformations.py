"""Transformations: the logical plan that DataStream API calls build.

Follows Flink's ``org.apache.flink.api.dag.Transformation`` and
``org.apache.flink.streaming.api.transformations``. Physical transformations (source, one
input, sink) become StreamNodes; logical ones (partition, union, side output) become virtual
nodes or plain edges in the StreamGraph (:mod:`rill.graph.stream_graph_generator`).

Ids come from a counter per environment (Flink uses a JVM-wide static counter), so the same
program builds the same plan every time; operator hashes never depend on them except through
the order of sources, as in Flink.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, List, Optional

from rill.operators.base import ChainingStrategy

__all__ = [
    "Transformation",
    "PhysicalTransformation",
    "SourceTransformation",
    "OneInputTransformation",
    "TwoInputTransformation",
    "SinkTransformation",
    "PartitionTransformation",
    "UnionTransformation",
    "SideOutputTransformation",
    "ExchangeMode",
    "validate_parallelism",
    "validate_max_parallelism",
]

from rill.state.key_groups import UPPER_BOUND_MAX_PARALLELISM


class ExchangeMode:
    """Flink's ``StreamExchangeMode``: how data is exchanged on an edge."""

    UNDEFINED = "UNDEFINED"
    PIPELINED = "PIPELINED"
    BATCH = "BATCH"


def validate_parallelism(parallelism: int, name: str) -> None:
    """:raises ValueError: unless ``parallelism`` is an int >= 1 (or -1 = the default)."""
    if not isinstance(parallelism, int) or isinstance(parallelism, bool):
        raise TypeError(f"Parallelism of operator '{name}' must be an int, got {parallelism!r}")
    if parallelism != -1 and parallelism < 1:
        raise ValueError(
            f"The parallelism of operator '{name}' must be at least 1, got {parallelism}."
        )


def validate_max_parallelism(max_parallelism: int, name: str) -> None:
    """:raises ValueError: unless ``1 <= max_parallelism <= 32768`` (or -1 = the default)."""
    if not isinstance(max_parallelism, int) or isinstance(max_parallelism, bool):
        raise TypeError(f"Max parallelism of operator '{name}' must be an int, got {max_parallelism!r}")
    if max_parallelism != -1 and not 0 < max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ValueError(
            f"The maximum parallelism of operator '{name}' must be between 1 and "
            f"{UPPER_BOUND_MAX_PARALLELISM}, got {max_parallelism}."
        )


class Transformation:
    """A node of the logical plan.

    :param id: unique per environment, increasing in creation order.
    :param name: operator name as shown in plans (``"Map"``, ``"Collection Source"``).
    :param parallelism: -1 means the environment's default at graph-generation time.
    :param output_type: optional ``TypeInformation`` of the produced records.
    """

    def __init__(self, id: int, name: str, parallelism: int = -1, output_type: Any = None):
        self.id = id
        self.name = name
        self.parallelism = parallelism
        self.max_parallelism = -1
        self.output_type = output_type
        self.uid: Optional[str] = None
        self.user_provided_node_hash: Optional[str] = None
        self.slot_sharing_group: Optional[str] = None
        #: the ResourceSpec of a SlotSharingGroup set with resources (Flink keeps the group)
        self.slot_sharing_group_resources: Any = None
        self.buffer_timeout_ms: Optional[int] = None
        self.description: Optional[str] = None
        self.co_location_group_key: Optional[str] = None
        self.parallelism_configured = parallelism != -1

    def get_inputs(self) -> List["Transformation"]:
        return []

    def set_parallelism(self, parallelism: int) -> None:
        validate_parallelism(parallelism, self.name)
        self.parallelism = parallelism
        self.parallelism_configured = True

    def set_max_parallelism(self, max_parallelism: int) -> None:
        validate_max_parallelism(max_parallelism, self.name)
        self.max_parallelism = max_parallelism

    def set_uid(self, uid: str) -> None:
        if not isinstance(uid, str) or not uid:
            raise ValueError(f"The uid of operator '{self.name}' must be a non-empty string, got {uid!r}")
        self.uid = uid

    def set_uid_hash(self, uid_hash: str) -> None:
        """Flink's ``setUidHash``: a 32-hex-character operator id used as-is."""
        if not isinstance(uid_hash, str) or len(uid_hash) != 32 or any(
            c not in "0123456789abcdefABCDEF" for c in uid_hash
        ):
            raise ValueError(
                f"Node hash of operator '{self.name}' must be a 32 character hexadecimal "
                f"string, got {uid_hash!r}"
            )
        self.user_provided_node_hash = uid_hash.lower()

    def __repr__(self) -> str:
        return f"{type(self).__name__}{{id={self.id}, name='{self.name}', parallelism={self.parallelism}}}"


class PhysicalTransformation(Transformation):
    """A transformation that becomes a StreamNode with an operator factory."""

    def __init__(self, id, name, operator_factory, parallelism=-1, output_type=None):
        super().__init__(id, name, parallelism, output_type)
        self.operator_factory = operator_factory

    def set_chaining_strategy(self, strategy: ChainingStrategy) -> None:
        self.operator_factory.set_chaining_strategy(strategy)


class SourceTransformation(PhysicalTransformation):
    """A source (FLIP-27 ``Source`` through a ``SourceOperator``). The node is named
    ``"Source: " + name`` as Flink names it."""

    def __init__(self, id, name, operator_factory, source, parallelism=-1, output_type=None):
        super().__init__(id, name, operator_factory, parallelism, output_type)
        self.source = source
        #: ``WatermarkAlignmentParams`` when the source's watermarks are aligned (FLIP-182)
        self.watermark_alignment = None


class OneInputTransformation(PhysicalTransformation):
    """One input, one operator. Keyed operators carry the ``state_key_selector``."""

    def __init__(self, id, name, operator_factory, input: Transformation, parallelism=-1, output_type=None):
        super().__init__(id, name, operator_factory, parallelism, output_type)
        self.input = input
        self.state_key_selector: Optional[Callable[[Any], Any]] = None
        self.state_key_type: Any = None

    def get_inputs(self):
        return [self.input]


class TwoInputTransformation(PhysicalTransformation):
    """Two inputs (``connect``); keyed when both key selectors are set."""

    def __init__(self, id, name, operator_factory, input1, input2, parallelism=-1, output_type=None):
        super().__init__(id, name, operator_factory, parallelism, output_type)
        self.input1 = input1
        self.input2 = input2
        self.state_key_selector1 = None
        self.state_key_selector2 = None
        self.state_key_type: Any = None

    def get_inputs(self):
        return [self.input1, self.input2]


class SinkTransformation(PhysicalTransformation):
    """A sink (Flink's ``LegacySinkTransformation``/``SinkTransformation``). The node is named
    ``"Sink: " + name``."""

    def __init__(self, id, name, operator_factory, input: Transformation, parallelism=-1):
        super().__init__(id, name, operator_factory, parallelism, None)
        self.input = input
        self.state_key_selector = None
        self.state_key_type = None

    def get_inputs(self):
        return [self.input]


class PartitionTransformation(Transformation):
    """Changes the partitioning of its input; a virtual node in the StreamGraph."""

    def __init__(self, id, input: Transformation, partitioner, exchange_mode: str = ExchangeMode.UNDEFINED):
        super().__init__(id, "Partition", input.parallelism, input.output_type)
        self.input = input
        self.partitioner = partitioner
        self.exchange_mode = exchange_mode

    def get_inputs(self):
        return [self.input]


class UnionTransformation(Transformation):
    """The union of several inputs of the same type: no node, only edges."""

    def __init__(self, id, inputs: List[Transformation]):
        super().__init__(id, "Union", inputs[0].parallelism, inputs[0].output_type)
        self.inputs = list(inputs)

    def get_inputs(self):
        return list(self.inputs)


class SideOutputTransformation(Transformation):
    """Selects the side output ``output_tag`` of its input; a virtual node."""

    def __init__(self, id, input: Transformation, output_tag):
        super().__init__(id, "SideOutput", input.parallelism, getattr(output_tag, "type_info", None))
        self.input = input
        self.output_tag = output_tag

    def get_inputs(self):
        return [self.input]


def id_counter() -> Callable[[], int]:
    """A fresh per-environment id generator starting at 1."""
    return itertools.count(1).__next__
