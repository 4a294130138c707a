"""``InputDependencyConstraint`` (PyFlink's ``pyflink.common.input_dependency_constraint``;
Flink's ``api.common.InputDependencyConstraint``, deprecated there with the legacy scheduler)."""

import enum

__all__ = ["InputDependencyConstraint"]


class InputDependencyConstraint(enum.Enum):
    """When a task with several inputs may be scheduled: ``ANY`` input consumable, or ``ALL``.

    Rill deploys every task of a streaming job at once (Flink's streaming scheduling), so for
    Rill's jobs the constraint is always met; the enum is the value PyFlink programs name."""

    ANY = 0
    ALL = 1
