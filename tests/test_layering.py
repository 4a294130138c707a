"""Layers point one way: common < state < network < operators < graph < runtime < datastream <
state_processor < cli.

DESIGN.md ("Decisions taken so far") makes an import from a later layer into an earlier one a
design error. This test reads every module's imports with ``ast`` -- top-level ones and those
inside functions, ``if TYPE_CHECKING:`` blocks included, since a type that only a later layer
defines is the same tie -- and fails naming the file, the line and the two layers.

``rill`` itself (``engine/__init__.py``, the version only) belongs to no layer; the examples are
user programs on top of every layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The layer order, earliest first, and the package prefix of each layer.
LAYERS = ("common", "state", "network", "operators", "graph", "runtime", "datastream", "state_processor", "cli",
          "examples")
_PREFIXES = (
    ("rill.common", "common"),
    ("rill.state", "state"),
    ("rill.network", "network"),
    ("rill.operators", "operators"),
    ("rill.graph", "graph"),
    ("rill.runtime", "runtime"),
    ("rill.datastream", "datastream"),
    ("rill.state_processor", "state_processor"),
    ("rill.cli", "cli"),
    ("rill.cluster_cli", "cli"),
    ("rill.examples", "examples"),
)
# Source folder -> dotted package, as setup.cfg's package_dir maps them.
_FOLDERS = (("engine", "rill"), ("operators", "rill.operators"), ("state", "rill.state"),
            ("network", "rill.network"))


def layer_of(module: str) -> str | None:
    """The layer of a dotted module name, or None for ``rill`` itself and non-Rill modules."""
    for prefix, layer in _PREFIXES:
        if module == prefix or module.startswith(prefix + "."):
            return layer
    return None


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT)
    folder, rest = rel.parts[0], rel.parts[1:]
    package = dict(_FOLDERS)[folder]
    parts = [p for p in rest]
    parts[-1] = parts[-1][: -len(".py")]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def _source_files() -> list[Path]:
    files = []
    for folder, _ in _FOLDERS:
        files.extend(sorted((ROOT / folder).rglob("*.py")))
    return files


def imported_modules(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``, at any depth."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
    return found


def backward_imports() -> list[tuple[str, int, str, str, str]]:
    """Every import from a later layer into an earlier one: (file, line, target, own, theirs)."""
    found = []
    for path in _source_files():
        module = _module_name(path)
        own = layer_of(module)
        if own is None:
            continue
        for line, target in imported_modules(path, module):
            theirs = layer_of(target)
            if theirs is not None and LAYERS.index(theirs) > LAYERS.index(own):
                found.append((str(path.relative_to(ROOT)), line, target, own, theirs))
    return found


def test_every_source_file_has_a_layer():
    unplaced = [str(p.relative_to(ROOT)) for p in _source_files()
                if layer_of(_module_name(p)) is None and _module_name(p) != "rill"]
    assert unplaced == []


# Backward imports not yet resolved, as (file, imported module); the list only shrinks. A new
# backward import fails the test, and so does an entry here that no longer exists.
KNOWN_BACKWARD: set[tuple[str, str]] = {
    # The cluster's Dispatcher and TaskExecutor import the whole API once so that the JobMaster
    # and task processes they fork start with it loaded (and can unpickle user programs). The
    # list of modules to preload belongs to whoever starts the cluster (the CLI), not here.
    ('engine/runtime/cluster/dispatcher.py', 'rill.datastream'),
    ('engine/runtime/cluster/task_executor_actor.py', 'rill.datastream'),
    # The collect sink opens the remote channel class of the cluster's collect service; the
    # task process should register a channel factory with the endpoint instead (a change to
    # the cluster's stream task actor, left to the cluster branches).
    ('operators/collect_sink.py', 'rill.runtime.cluster.collect_service'),
}


def test_no_import_points_from_a_later_layer_into_an_earlier_one():
    found = backward_imports()
    new = [f"{f}:{line}: {own} imports {target} from the later layer {theirs}"
           for f, line, target, own, theirs in found if (f, target) not in KNOWN_BACKWARD]
    assert not new, "backward imports:\n" + "\n".join(new)


def test_the_list_of_known_backward_imports_is_current():
    stale = KNOWN_BACKWARD - {(f, target) for f, _, target, _, _ in backward_imports()}
    assert not stale, f"resolved, remove from KNOWN_BACKWARD: {sorted(stale)}"


@pytest.mark.parametrize("module, layer", [
    ("rill.common.typeinfo", "common"), ("rill.state.heap", "state"),
    ("rill.network.credit", "network"), ("rill.operators.base", "operators"),
    ("rill.graph.job_graph", "graph"), ("rill.runtime.tasks.stream_task", "runtime"),
    ("rill.datastream", "datastream"), ("rill.state_processor", "state_processor"), ("rill.cli", "cli"), ("rill", None), ("thespian", None),
])
def test_layer_of(module, layer):
    assert layer_of(module) == layer


def test_relative_imports_resolve_against_their_package():
    path = ROOT / "network" / "netty" / "view_reader.py"
    targets = {t for _, t in imported_modules(path, "rill.network.netty.view_reader")}
    assert "rill.network.api.serialization.record_serializer" in targets
    assert "rill.network.buffer.buffer" in targets
