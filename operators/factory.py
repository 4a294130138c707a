"""Operator factories: what the plan carries instead of live operators.

Follows Flink's ``SimpleOperatorFactory``. Graph nodes (StreamNode, JobVertex) hold a factory,
never a running operator; each subtask gets its own operator from :meth:`create_operator`,
a deep copy made by a cloudpickle round trip, exactly as a deployed task deserializes user code.
"""

from __future__ import annotations

from typing import Optional

import cloudpickle

from rill.operators.base import ChainingStrategy, StreamOperator

__all__ = ["SimpleOperatorFactory", "OperatorSerializationError"]


class OperatorSerializationError(TypeError):
    """An operator (usually its user function) cannot be serialized for deployment."""


class SimpleOperatorFactory:
    """Creates per-subtask copies of a prototype operator.

    :param operator: the prototype; never run itself.
    :param chaining_strategy: overrides the operator class' default when given.
    """

    def __init__(self, operator: StreamOperator, chaining_strategy: Optional[ChainingStrategy] = None):
        self.operator = operator
        self.chaining_strategy = chaining_strategy or operator.chaining_strategy
        self._serialized: Optional[bytes] = None

    def set_chaining_strategy(self, strategy: ChainingStrategy) -> None:
        self.chaining_strategy = strategy

    @property
    def operator_class(self) -> type:
        return type(self.operator)

    def serialize(self, operator_name: str) -> bytes:
        """The pickled prototype.

        :raises OperatorSerializationError: naming the operator, when cloudpickle fails.
        """
        if self._serialized is None:
            try:
                self._serialized = cloudpickle.dumps(self.operator)
            except Exception as e:  # cloudpickle raises many kinds
                raise OperatorSerializationError(
                    f"The function of operator '{operator_name}' cannot be serialized for "
                    f"deployment: {type(e).__name__}: {e}"
                ) from e
        return self._serialized

    def create_operator(self, operator_name: str = "?") -> StreamOperator:
        """A fresh operator for one subtask (deep copy of the prototype)."""
        return cloudpickle.loads(self.serialize(operator_name))
