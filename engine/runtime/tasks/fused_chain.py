"""Chained ``Map``/``Filter`` runs fused into one Python loop per batch.

A chain such as ``Source -> Map -> Filter -> Sink`` hands each batch from operator to operator
as a list (:class:`~rill.runtime.tasks.outputs.ChainingOutput`): each ``StreamMap`` /
``StreamFilter`` runs its function from a C-level ``map``/``filter`` over the whole batch.
Calling a Python function from C costs a new interpreter frame entry per record, while CPython
3.11 inlines a Python-to-Python call; and the map's list keeps a batch of new tuples alive, so
the cyclic garbage collector runs about once per batch. For a run of two or more such
operators containing a ``Filter``, :func:`chaining_output` compiles one loop instead::

    for v in values:
        v = map_fn(v)
        if not filter_fn(v): continue
        append(v)

which calls the functions as a hand-written loop does and keeps only the surviving records.

Visible behaviour is unchanged:

- the same records, in the same order, reach the run's tail output (its last operator's main
  output) as one list per input batch (not emitted when empty), as the operators emit them;
- a batch that carries per-record timestamps, and every single record (``collect``), go through
  the operators as before;
- an exception from a function propagates unchanged, tagged with the name of the operator whose
  function raised (read from the line of the loop it came out of, so no per-record bookkeeping),
  after what the records before the failing one produced has been emitted (as record-at-a-time
  processing and the operators' own ``process_batch`` do). Functions are called record by record
  through the run, as in Flink, rather than operator by operator over the batch;
- watermarks, watermark statuses, barriers, metrics (counted per task) and the job graph are
  untouched: only the batch data path between the run's operators changes.

Only the exact classes ``StreamMap`` and ``StreamFilter`` are fused (a subclass may override
``process_batch``), and only along main outputs without side outputs.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from rill.operators.base import attribute_error
from rill.operators.simple import StreamFilter, StreamMap
from rill.runtime.tasks.outputs import ChainingOutput, TaggedOutput

__all__ = ["chaining_output", "FusedChainingOutput"]

_MAP = "map"
_FILTER = "filter"


class FusedChainingOutput(ChainingOutput):
    """A :class:`ChainingOutput` to the first operator of a fused ``Map``/``Filter`` run.

    :param operator: the run's first operator (as for ``ChainingOutput``).
    :param operator_name: its name.
    :param stages: ``[(kind, function, operator name)]`` for the run, in chain order; ``kind`` is
        ``"map"`` or ``"filter"``, ``function`` the operator's per-record callable (with its key
        context, if any).
    :param tail: the run's last operator's main output, which gets the surviving records.
    """

    __slots__ = ("stages", "tail", "_run", "_line_names", "_code")

    def __init__(self, operator, operator_name: str, stages: List[Tuple[str, Callable[[Any], Any], str]],
                 tail) -> None:
        super().__init__(operator, operator_name)
        self.stages = stages
        self.tail = tail
        factory, first_line = _compile(tuple(kind for kind, _fn, _name in stages))
        self._run = factory(*[fn for _kind, fn, _name in stages])
        self._code = self._run.__code__
        self._line_names: Dict[int, str] = {first_line + i: name for i, (_k, _f, name) in enumerate(stages)}

    def collect_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        if not values:
            return
        if timestamps is not None:
            ChainingOutput.collect_batch(self, values, timestamps)
            return
        out: List[Any] = []
        try:
            self._run(values, out)
        except BaseException as e:
            attribute_error(e, self._failed_stage(e))
            if out:
                self.tail.collect_batch(out, None)
            raise
        if out:
            self.tail.collect_batch(out, None)

    def _failed_stage(self, error: BaseException) -> str:
        """The name of the operator whose function raised ``error`` in the fused loop."""
        tb = error.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code is self._code:
                name = self._line_names.get(tb.tb_lineno)
                if name is not None:
                    return name
            tb = tb.tb_next
        return self.operator_name  # not from a stage's call (e.g. out of memory in the loop)


def chaining_output(operator, operator_name: str) -> ChainingOutput:
    """The output through which a predecessor hands records to ``operator`` (already set up):
    a :class:`FusedChainingOutput` when ``operator`` starts a run of at least two chained
    ``StreamMap``/``StreamFilter`` operators with a ``StreamFilter`` among them, else a plain
    :class:`ChainingOutput`."""
    stages: List[Tuple[str, Callable[[Any], Any], str]] = []
    op, name, tail = operator, operator_name, None
    while True:
        cls = type(op)
        if cls is StreamMap:
            stages.append((_MAP, op._map, name))
        elif cls is StreamFilter:
            stages.append((_FILTER, op._filter, name))
        else:
            break
        tail = op.output  # a TaggedOutput's collect_batch is its main output's
        main = tail.main if type(tail) is TaggedOutput and not tail.side else tail
        if not isinstance(main, ChainingOutput):
            break
        op, name = main.operator, main.operator_name
    if len(stages) < 2 or _FILTER not in [kind for kind, _f, _n in stages]:
        return ChainingOutput(operator, operator_name)
    return FusedChainingOutput(operator, operator_name, stages, tail)


_compiled: Dict[Tuple[str, ...], Tuple[Callable[..., Callable[[List[Any], List[Any]], None]], int]] = {}


def _compile(kinds: Tuple[str, ...]) -> Tuple[Callable[..., Callable[[List[Any], List[Any]], None]], int]:
    """``(factory, first stage line)``: ``factory(*functions)`` returns ``run(values, out)``,
    the loop for stages of ``kinds``; stage *i*'s call is on line ``first + i`` of its code."""
    hit = _compiled.get(kinds)
    if hit is not None:
        return hit
    names = [f"f{i}" for i in range(len(kinds))]
    lines = [
        f"def factory({', '.join(names)}):",
        "    def run(values, out):",
        "        append = out.append",
        "        for v in values:",
    ]
    first_line = len(lines) + 1
    for name, kind in zip(names, kinds):
        lines.append(f"            v = {name}(v)" if kind is _MAP else f"            if not {name}(v): continue")
    lines.append("            append(v)")
    lines.append("    return run")
    namespace: Dict[str, Any] = {}
    filename = f"<rill fused chain: {' -> '.join(kinds)}>"
    exec(compile("\n".join(lines) + "\n", filename, "exec"), namespace)  # noqa: S102 - our own source
    hit = _compiled[kinds] = (namespace["factory"], first_line)
    return hit
