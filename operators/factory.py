"""Operator factories: what the plan carries instead of live operators.

Follows Flink's ``SimpleOperatorFactory``. Graph nodes (StreamNode, JobVertex) hold a factory,
never a running operator; each subtask gets its own operator from :meth:`create_operator`,
a deep copy made by a cloudpickle round trip, exactly as a deployed task deserializes user code.

One exception, inside one process: objects that declare ``_rill_shared_plan_object = True``
(FLIP-27 ``Source`` s: immutable factories of per-subtask readers) are passed by reference
instead of copied, so a collection source does not copy its elements once per subtask.
Shipping to another process (:meth:`serialize` with ``for_shipping=True``) pickles them too.
"""

from __future__ import annotations

import io
import pickle
from typing import Any, List, Optional, Tuple

from rill.common.pickling import SourceKeepingPickler, dumps
from rill.operators.base import ChainingStrategy, StreamOperator

__all__ = ["SimpleOperatorFactory", "OperatorSerializationError"]


class OperatorSerializationError(TypeError):
    """An operator (usually its user function) cannot be serialized for deployment."""


class _InProcessPickler(SourceKeepingPickler):
    """Pickles an operator but records shared plan objects by reference (code keeps its file
    name, so tracebacks of by-value functions name their file)."""

    def __init__(self, file, shared: List[Any]):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._shared = shared

    def persistent_id(self, obj: Any) -> Optional[int]:
        if getattr(type(obj), "_rill_shared_plan_object", False):
            self._shared.append(obj)
            return len(self._shared) - 1
        return None


class _InProcessUnpickler(pickle.Unpickler):
    def __init__(self, file, shared: List[Any]):
        super().__init__(file)
        self._shared = shared

    def persistent_load(self, pid: int) -> Any:
        return self._shared[pid]


class SimpleOperatorFactory:
    """Creates per-subtask copies of a prototype operator.

    :param operator: the prototype; never run itself.
    :param chaining_strategy: overrides the operator class' default when given.
    """

    def __init__(self, operator: StreamOperator, chaining_strategy: Optional[ChainingStrategy] = None):
        self.operator = operator
        self.chaining_strategy = chaining_strategy or operator.chaining_strategy
        # (pickled bytes, shared plan objects): one tuple, built once and replaced atomically,
        # because parallel subtasks call create_operator from their task threads at once
        self._in_process: Optional[Tuple[bytes, List[Any]]] = None

    def set_chaining_strategy(self, strategy: ChainingStrategy) -> None:
        self.chaining_strategy = strategy

    @property
    def operator_class(self) -> type:
        return type(self.operator)

    def __getstate__(self):
        # a factory travels with its prototype only; the in-process cache is rebuilt
        return {"operator": self.operator, "chaining_strategy": self.chaining_strategy}

    def __setstate__(self, state) -> None:
        self.__init__(state["operator"], state["chaining_strategy"])

    def serialize(self, operator_name: str, for_shipping: bool = True) -> bytes:
        """The pickled prototype (``for_shipping=False``: shared plan objects by reference,
        loadable only in this process through :meth:`create_operator`).

        :raises OperatorSerializationError: naming the operator, when pickling fails.
        """
        if for_shipping:
            return self._pickle(operator_name, lambda: dumps(self.operator))
        return self._in_process_form(operator_name)[0]

    def _in_process_form(self, operator_name: str) -> Tuple[bytes, List[Any]]:
        form = self._in_process
        if form is None:
            def dump() -> Tuple[bytes, List[Any]]:
                buf = io.BytesIO()
                shared: List[Any] = []
                _InProcessPickler(buf, shared).dump(self.operator)
                return buf.getvalue(), shared

            form = self._pickle(operator_name, dump)
            self._in_process = form
        return form

    def _pickle(self, operator_name: str, dump):
        try:
            return dump()
        except Exception as e:  # cloudpickle raises many kinds
            raise OperatorSerializationError(
                f"The function of operator '{operator_name}' cannot be serialized for "
                f"deployment: {type(e).__name__}: {e}"
            ) from e

    def create_operator(self, operator_name: str = "?") -> StreamOperator:
        """A fresh operator for one subtask of this process (deep copy of the prototype,
        sharing only shared plan objects)."""
        data, shared = self._in_process_form(operator_name)
        return _InProcessUnpickler(io.BytesIO(data), shared).load()
