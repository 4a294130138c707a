"""PyFlink's own DataStream examples run on Rill with only their imports changed.

The examples are taken from the apache-flink 2.3.0 wheel (``pyflink/examples/datastream``),
fetched once with ``pip download --no-deps apache-flink==2.3.0`` into a cache directory
(``$RILL_PYFLINK_WHEEL_DIR`` or ``~/.cache/rill-tests/apache-flink-2.3.0``); nothing of the wheel
is imported. Each example's ``pyflink`` imports are rewritten to ``rill``, the program runs in
its own interpreter on the real runtime, and its stdout is compared with what PyFlink 2.3
prints, written out below.

The expected lines are PyFlink's, with two differences the issue sets aside: PyFlink prints a
``N> `` subtask prefix when the job's parallelism is above 1 (stripped before comparing), and
Java prints a typed ``Types.TUPLE`` as ``(hi,0,5,4)`` where Rill prints the Python tuple
``('hi', 0, 5, 4)``. Where PyFlink's default parallelism (the number of cores) makes the
interleaving of keys depend on the machine, lines are compared key by key, in order.

The float values of ``state_access`` and ``event_time_timer`` follow from ``Types.FLOAT()``
being float32 in Flink: PyFlink's first line is ``('Alice', 110.0999984741211)`` (the typed
source), and the keyed state rounds too: both examples enable TTL with the default visibility
``NeverReturnExpired``, which makes PyFlink's ``state_impl`` disable its state cache, so every
``update`` is committed (serialized as FLOAT) and every ``value()`` is read back from Java.
The later lines are that float32 arithmetic.
"""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys

import pytest

from _pyflink_wheel import pyflink_wheel

EXAMPLES = "pyflink/examples/datastream/"
RUN_TIMEOUT_S = 120

WINDOW_NOTE = "Printing result to stdout. Use --output to specify output path."

#: example path in the wheel -> (PyFlink's output lines, compared key by key?)
EXPECTED = {
    "basic_operations.py": ([
        """(1, '{"name": "Flink", "tel": 124, "addr": {"country": "Germany", "city": "Berlin"}}')""",
        """(2, '{"name": "hello", "tel": 136, "addr": {"country": "China", "city": "Shanghai"}}')""",
        """(3, '{"name": "world", "tel": 125, "addr": {"country": "USA", "city": "NewYork"}}')""",
        """(4, '{"name": "PyFlink", "tel": 33, "addr": {"country": "China", "city": "Hangzhou"}}')""",
        """(1, '{"name": "Flink", "tel": 124, "addr": {"country": "Germany", "city": "Berlin"}}')""",
        "('Germany', 123)",
        "('China', 135)",
        "('USA', 124)",
        "('China', 167)",
    ], False),
    "process_json_data.py": ([
        "(2, {'name': 'hello', 'tel': 136, 'addr': {'country': 'China', 'city': 'Shanghai'}})",
        "(4, {'name': 'PyFlink', 'tel': 33, 'addr': {'country': 'China', 'city': 'Hangzhou'}})",
    ], True),
    "state_access.py": ([
        "('Alice', 110.0999984741211)",
        "('Bob', 30.200000762939453)",
        "('Alice', 130.0999984741211)",
        "('Bob', 83.29999923706055)",
        "('Alice', 143.20000648498535)",
        "('Bob', 86.40000295639038)",
        "('Bob', 102.50000190734863)",
        "('Alice', 163.30001258850098)",
    ], True),
    # every record arrives before the first periodic watermark; the final watermark fires the
    # timers, each printing its key's final (float32) sum
    "event_time_timer.py": ([
        "('Alice', 163.30001831054688)",
        "('Bob', 102.5)",
        "('Alice', 163.30001831054688)",
        "('Bob', 102.5)",
        "('Bob', 102.5)",
        "('Alice', 163.30001831054688)",
        "('Bob', 102.5)",
        "('Alice', 163.30001831054688)",
    ], True),
    "windowing/tumbling_count_window.py": ([WINDOW_NOTE, "('hi', 4)", "('hello', 6)", "('hello', 12)"], False),
    "windowing/tumbling_time_window.py": ([
        WINDOW_NOTE, "('hi', 0, 5, 4)", "('hi', 5, 10, 3)", "('hi', 15, 20, 1)"], False),
    "windowing/sliding_time_window.py": ([
        WINDOW_NOTE, "('hi', -2, 3, 2)", "('hi', 0, 5, 4)", "('hi', 2, 7, 4)", "('hi', 4, 9, 3)",
        "('hi', 6, 11, 2)", "('hi', 8, 13, 2)", "('hi', 12, 17, 1)", "('hi', 14, 19, 1)"], False),
    "windowing/session_with_gap_window.py": ([WINDOW_NOTE, "('hi', 1, 14, 6)", "('hi', 15, 20, 1)"], False),
    "windowing/session_with_dynamic_gap_window.py": ([WINDOW_NOTE, "('hi', 1, 30, 7)"], False),
}

#: word_count sets BATCH runtime mode: one final count per word (its expected lines are
#: computed from the example's own data, see test_word_count_prints_final_counts_in_batch_mode)
WORD_COUNT = "word_count.py"


@pytest.fixture(scope="module")
def examples_dir(tmp_path_factory) -> pathlib.Path:
    """The ten examples, imports rewritten to ``rill``, in a temporary directory."""
    wheel = pyflink_wheel()
    out = tmp_path_factory.mktemp("pyflink_examples")
    with wheel:
        for name in [*EXPECTED, WORD_COUNT]:
            source = wheel.read(EXAMPLES + name).decode()
            target = out / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(port(source))
    return out


def port(source: str) -> str:
    """The PyFlink program with only its imports changed (``pyflink.X`` -> ``rill.X``)."""
    return re.sub(r"^(\s*(?:from|import)\s+)pyflink\b", r"\1rill", source, flags=re.MULTILINE)


def run_example(path: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, cwd=str(path.parent))


def printed_lines(stdout: str):
    """Stdout without PyFlink's ``N> `` prefixes and without log lines (the examples log at
    INFO to stdout; only the records and the examples' own prints are compared)."""
    lines = [re.sub(r"^\d+> ", "", line) for line in stdout.splitlines()]
    return [line for line in lines if line.startswith("(") or line == WINDOW_NOTE]


def by_key(lines):
    """Lines grouped by their first field, each key's lines kept in order."""
    return sorted(lines, key=lambda line: line.split(",", 1)[0])


def test_the_port_changes_only_imports():
    assert port("from pyflink.common import Types\nimport pyflink.datastream\nx = 'pyflink.a'\n") == \
        "from rill.common import Types\nimport rill.datastream\nx = 'pyflink.a'\n"


@pytest.mark.parametrize("name", list(EXPECTED))
def test_example_prints_what_pyflink_prints(examples_dir, name):
    result = run_example(examples_dir / name)
    assert result.returncode == 0, result.stderr[-3000:]
    expected, keyed = EXPECTED[name]
    actual = printed_lines(result.stdout)
    if keyed:
        assert by_key(actual) == by_key(expected)
    else:
        assert actual == expected


def test_word_count_prints_final_counts_in_batch_mode(examples_dir):
    # In BATCH mode PyFlink's reduce emits one final record per key (Flink's
    # BatchGroupedReduceOperator), so it prints each word once with its count over the
    # example's word_count_data, keys in the order of its sort (so compared as sorted lines:
    # words such as "be," and "be" share by_key's first field)
    source = (examples_dir / WORD_COUNT).read_text()
    tree = ast.parse(source)
    data = next(ast.literal_eval(node.value) for node in tree.body
                if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "word_count_data")
    counts = {}
    for line in data:
        for word in line.split():
            counts[word] = counts.get(word, 0) + 1
    result = run_example(examples_dir / WORD_COUNT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(printed_lines(result.stdout)) == sorted([WINDOW_NOTE, *map(str, counts.items())])
    assert len(counts) > 100
