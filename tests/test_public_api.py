"""The public surface: every name a module exports in ``__all__`` exists, and every exported
class and function has a docstring (types, units, errors and the Flink class it follows are
the docstrings' job; this test only catches missing ones)."""

import importlib
import inspect
import pkgutil

import pytest

import rill
import rill.network
import rill.operators
import rill.state


def _modules():
    names = set()
    for pkg in (rill, rill.operators, rill.state, rill.network):
        names.add(pkg.__name__)
        for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            names.add(m.name)
    return sorted(n for n in names if ".examples" not in n)


@pytest.mark.parametrize("module_name", _modules())
def test_exported_names_exist_and_are_documented(module_name):
    module = importlib.import_module(module_name)
    undocumented = []
    for name in getattr(module, "__all__", []):
        obj = getattr(module, name)  # AttributeError = an exported name that does not exist
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and obj.__module__ == module_name:
            if not (obj.__doc__ or "").strip():
                undocumented.append(name)
    assert undocumented == []


def test_pyflink_module_names_exist():
    for name in ["rill.datastream", "rill.datastream.functions", "rill.datastream.state",
                 "rill.datastream.window", "rill.datastream.connectors",
                 "rill.datastream.connectors.file_system", "rill.datastream.connectors.number_seq",
                 "rill.common", "rill.common.typeinfo", "rill.common.serialization",
                 "rill.common.watermark_strategy", "rill.common.time"]:
        module = importlib.import_module(name)
        # a PyFlink module path is a package or module of its own name, with a public surface
        assert module.__name__ == name
        assert module.__doc__ and module.__doc__.strip(), f"{name} has no docstring"
        exported = getattr(module, "__all__", None)
        assert exported, f"{name} exports nothing (no __all__)"
        assert [n for n in exported if not hasattr(module, n)] == [], name
