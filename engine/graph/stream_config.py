"""StreamConfig: what a StreamTask needs to know about each operator of its chain.

Follows Flink's ``org.apache.flink.streaming.api.graph.StreamConfig`` — but typed fields
instead of a serialized ``Configuration``. One record per chained operator; a JobVertex holds
them in ``stream_configs`` (StreamNode id → StreamConfig), the head's record has
``is_chain_start``. The OperatorChain is built from them: ``chained_outputs`` become
ChainingOutputs to the operators named by their ``target_id``, ``non_chained_outputs``
become RecordWriterOutputs (the i-th transitive out edge of the vertex writes the i-th
produced data set).

Rill difference: the head's ``chain_index`` is 0, as in the Flink 1.11 the design notes
describe; Flink ≥ 1.12 starts at 1 because index 0 is reserved for chained source inputs of
multiple-input tasks, which Rill does not have.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional

from rill.graph.stream_graph import StreamEdge

__all__ = ["StreamConfig"]


@dataclass
class StreamConfig:
    """Configuration of one chained operator.

    :param vertex_id: hex id of the JobVertex the operator runs in.
    :param operator_id: hex generated operator id (StreamGraphHasherV2 hash).
    :param user_operator_id: hex ``set_uid_hash`` id, or ``None``.
    :param uid: the user's ``uid``, or ``None`` (recorded in checkpoint metadata, named in
        restore errors).
    :param operator_name: the StreamNode's operator name.
    :param node_id: the StreamNode id.
    :param chain_index: position in the chain (head 0, +1 per chained hop).
    :param is_chain_start: the head operator.
    :param is_chain_end: no chained outputs.
    :param operator_factory: creates the per-subtask operator.
    :param chained_outputs: StreamEdges to operators in the same chain, in out-edge order.
    :param non_chained_outputs: StreamEdges leaving the chain from this operator.
    :param state_key_selector: key selector of the (first) input; ``state_key_selector2``
        for the second input; ``state_key_type`` the key type information.
    :param parallelism: the vertex parallelism.
    :param max_parallelism: the *effective* max parallelism (number of key groups).
    :param buffer_timeout_ms: output flush interval (Flink semantics: 0 flushes after every
        record, -1 only when a buffer is full).
    :param output_type: type information of the produced records, if known.
    :param is_source: the operator is a source; ``source`` is the Source object.
    :param watermark_alignment: for a source whose strategy (or the strategy assigned right
        after it) was built ``with_watermark_alignment``, its ``WatermarkAlignmentParams``.
    """

    vertex_id: str
    operator_id: str
    user_operator_id: Optional[str]
    operator_name: str
    node_id: int
    chain_index: int
    is_chain_start: bool
    is_chain_end: bool
    operator_factory: Any
    chained_outputs: List[StreamEdge] = field(default_factory=list)
    non_chained_outputs: List[StreamEdge] = field(default_factory=list)
    state_key_selector: Optional[Callable[[Any], Any]] = None
    state_key_selector2: Optional[Callable[[Any], Any]] = None
    state_key_type: Any = None
    parallelism: int = 1
    max_parallelism: int = 128
    buffer_timeout_ms: int = 100
    output_type: Any = None
    is_source: bool = False
    source: Any = None
    watermark_alignment: Any = None
    uid: Optional[str] = None

    def is_keyed(self) -> bool:
        return self.state_key_selector is not None or self.state_key_selector2 is not None
