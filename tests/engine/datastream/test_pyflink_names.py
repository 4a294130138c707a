"""Every public name of PyFlink's DataStream API exists in Rill at the same module path.

The names are the ``__all__`` lists of every module under ``pyflink/common`` and
``pyflink/datastream`` in the apache-flink 2.3.0 wheel (read statically; nothing of the wheel
is imported), without the connectors to external systems (Kafka, Pulsar, Kinesis,
Elasticsearch, Cassandra, JDBC, RabbitMQ, dynamic Kafka, hybrid source): 169 distinct names
in 249 (module, name) places. ``pyflink.X.Y`` must be importable as ``rill.X.Y`` and have the
name.

Names owned by open issues are listed in ``OWNED_ELSEWHERE`` (none now); the test fails on any other
missing name, and on a listed name that has arrived (so the list shrinks as issues land).
"""

from __future__ import annotations

import ast
import importlib

import pytest

from _pyflink_wheel import pyflink_wheel

EXTERNAL_CONNECTORS = {"cassandra", "dynamic_kafka", "elasticsearch", "hybrid_source", "jdbc", "kafka",
                       "kinesis", "pulsar", "rabbitmq"}

#: missing names -> the issue that owns them
OWNED_ELSEWHERE: dict = {}


@pytest.fixture(scope="module")
def pyflink_public_names():
    """``{pyflink module: [names in its __all__]}``."""
    names = {}
    with pyflink_wheel() as wheel:
        for path in wheel.namelist():
            parts = path[:-len(".py")].split("/") if path.endswith(".py") else None
            if not parts or parts[0] != "pyflink" or len(parts) < 3 or parts[1] not in ("common", "datastream"):
                continue
            if "examples" in parts or parts[-1] in EXTERNAL_CONNECTORS:
                continue
            module = ".".join(p for p in parts if p != "__init__")
            for node in ast.parse(wheel.read(path)).body:
                if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                    names[module] = list(ast.literal_eval(node.value))
    return names


def missing_from_rill(names):
    missing = {}
    for module, exported in names.items():
        rill_module = "rill" + module[len("pyflink"):]
        try:
            target = importlib.import_module(rill_module)
        except ModuleNotFoundError:
            target = None
        for name in exported:
            if target is None or not hasattr(target, name):
                missing.setdefault(name, []).append(rill_module)
    return missing


def test_the_measure_is_pyflinks_169_names(pyflink_public_names):
    distinct = {n for exported in pyflink_public_names.values() for n in exported}
    assert len(distinct) == 169
    assert sum(map(len, pyflink_public_names.values())) == 249


def test_every_pyflink_name_is_in_rill_at_its_module_path(pyflink_public_names):
    missing = missing_from_rill(pyflink_public_names)
    unexpected = {n: where for n, where in missing.items() if n not in OWNED_ELSEWHERE}
    assert unexpected == {}, "PyFlink names missing from Rill (module paths where they are expected)"
    arrived = sorted(set(OWNED_ELSEWHERE) - set(missing))
    assert arrived == [], "names now present: remove them from OWNED_ELSEWHERE"
    distinct = {n for exported in pyflink_public_names.values() for n in exported}
    assert (len(distinct) - len(missing), len(distinct)) == (169, 169)
