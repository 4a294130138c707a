"""An operator's exception, carried from a Spark task to the driver unchanged.

Spark reports a failed Python task as a ``PythonException`` holding only the traceback text;
Rill's promise (a ``JobExecutionException`` whose ``__cause__`` is the user's own exception,
as in the embedded mode) needs the exception itself, so the task raises a
:class:`SparkTaskFailure` whose message embeds it, cloudpickled and base64-encoded, between
markers the driver finds again in Spark's message.
"""

from __future__ import annotations

import base64
import re
import traceback
from typing import Optional

import cloudpickle

__all__ = ["SparkTaskFailure", "embed_failure", "recover_failure"]

_MARK = "RILL-TASK-FAILURE"
_FOUND = re.compile(_MARK + r"<([A-Za-z0-9+/=]+)>")


class SparkTaskFailure(RuntimeError):
    """Raised in a Spark task for an operator's exception; the message names the task and embeds
    the exception (see the module docstring)."""


def embed_failure(error: BaseException, task_name: str) -> SparkTaskFailure:
    """A :class:`SparkTaskFailure` carrying ``error`` (or, if it cannot be pickled, a
    ``RuntimeError`` with its type, message and traceback text)."""
    try:
        data = cloudpickle.dumps(error)
    except Exception:  # noqa: BLE001 - an unpicklable exception still reaches the driver as text
        text = "".join(traceback.format_exception(error))
        data = cloudpickle.dumps(RuntimeError(f"{type(error).__name__}: {error}\n{text}"))
    encoded = base64.b64encode(data).decode("ascii")
    return SparkTaskFailure(f"task '{task_name}' failed: {type(error).__name__}: {error} {_MARK}<{encoded}>")


def recover_failure(spark_error: BaseException) -> Optional[BaseException]:
    """The exception a task embedded in ``spark_error``'s message, or ``None``."""
    found = _FOUND.search(str(spark_error))
    if found is None:
        return None
    return cloudpickle.loads(base64.b64decode(found.group(1)))
