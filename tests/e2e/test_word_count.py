"""End to end: WordCount over real text (the repository's own sources) with a file sink in both
execution modes, and through ``rill run`` with the print sink, at parallelism 1 and 2.

The job emits a rolling count per word: for every word the emitted counts must be exactly
1, 2, ..., n in order (each once), and n must equal ``collections.Counter`` over the same
tokenization (``re.findall(r"\\w+", text.lower())``).
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Dict, Iterable, List, Tuple

import pytest

from rill.datastream import StreamExecutionEnvironment
from rill.examples import word_count

REPO = Path(__file__).resolve().parents[2]
RILL = str(Path(sys.executable).parent / "rill")
PART_FILE = re.compile(r"^counts-[0-9a-f]{32}-(\d+)-(\d+)\.txt$")
SPLIT_SIZE = 4 << 20  # FileSource's default split size

# lines the repository's sources lack: non-ASCII words, CRLF endings, digits and underscores,
# case folding that changes length ("İ".lower() is two code points), no final newline
TRICKY = ("Straße STRASSE straße\r\nÜnïcode wörld_1 __init__ 42 4_2\r\n"
          "İstanbul ΣΊΣΥΦΟΣ σίσυφος 東京 東京\n\n\t  \nend-of-file no newline")


def _repo_text() -> str:
    sources = sorted(p for top in ("engine", "operators", "state", "network")
                     for p in (REPO / top).rglob("*.py"))
    assert sources
    return "".join(p.read_text(encoding="utf-8") for p in sources)


@pytest.fixture(scope="module")
def small_text(tmp_path_factory) -> Path:
    """~0.6 MB of real text: split in two at parallelism 2, one split at parallelism 1."""
    path = tmp_path_factory.mktemp("wc_small") / "sources.txt"
    path.write_text(_repo_text() + TRICKY, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def big_text(tmp_path_factory) -> Path:
    """Larger than one split (4 MiB), so even parallelism 1 reads several splits whose
    boundaries fall inside lines."""
    text = _repo_text()
    copies = SPLIT_SIZE // len(text.encode("utf-8")) + 2
    path = tmp_path_factory.mktemp("wc_big") / "sources_x.txt"
    path.write_text(TRICKY + "\n" + text * copies + TRICKY, encoding="utf-8")
    assert path.stat().st_size > SPLIT_SIZE
    return path


def _expected(path: Path) -> Counter:
    return Counter(re.findall(r"\w+", path.read_text(encoding="utf-8").lower()))


def _check_counts(records: Iterable[Tuple[str, int]], expected: Counter) -> None:
    seen: Dict[str, List[int]] = defaultdict(list)
    for word, count in records:
        seen[word].append(count)
    assert set(seen) == set(expected), (
        f"missing: {sorted(set(expected) - set(seen))[:10]}, extra: {sorted(set(seen) - set(expected))[:10]}")
    bad = {w: c[:20] for w, c in seen.items() if c != list(range(1, expected[w] + 1))}
    assert not bad, f"{len(bad)} words whose counts are not 1..n in order, e.g. {dict(list(bad.items())[:5])}"
    assert {w: c[-1] for w, c in seen.items()} == dict(expected)


_RECORD = re.compile(r"\('(\w+)', (\d+)\)")


def _parse_record(text: str) -> Tuple[str, int]:
    """``str(('word', 3))`` → ('word', 3); words are \\w runs, so their repr needs no escapes."""
    match = _RECORD.fullmatch(text)
    if match:
        return match.group(1), int(match.group(2))
    value = ast.literal_eval(text)
    assert isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], int), text
    return value


@pytest.mark.parametrize("corpus, parallelism",
                         [("small_text", 1), ("small_text", 2), ("big_text", 1)])
def test_file_output(execution_mode, tmp_path, request, corpus, parallelism):
    path: Path = request.getfixturevalue(corpus)
    out = tmp_path / "word_count"
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    word_count.build_job(env, str(path), str(out))
    env.execute("WordCount")

    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    assert files and not [f for f in files if "inprogress" in f], files
    records: List[Tuple[str, int]] = []
    for name in files:
        match = PART_FILE.match(name)
        assert match, f"unexpected file in the output directory: {name}"
        assert int(match.group(1)) < parallelism
        # one word's updates all come from one subtask, in order, so file order is emit order
        records.extend(_parse_record(line) for line in (out / name).read_text(encoding="utf-8").splitlines())
    _check_counts(records, _expected(path))


@pytest.mark.parametrize("parallelism", [1, 2])
def test_cli_print(tmp_path, small_text, parallelism):
    proc = subprocess.run(
        [RILL, "run", "--no-progress", "-p", str(parallelism), "-m", "rill.examples.word_count",
         "--", "--input", str(small_text)],
        cwd=tmp_path, capture_output=True, text=True, encoding="utf-8", timeout=120,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    records: List[Tuple[str, int]] = []
    prefixes = set()
    for line in lines:
        if parallelism > 1:
            # Flink's print sink prefixes "<subtask index + 1>> " when parallelism > 1
            prefix, _, line = line.partition("> ")
            prefixes.add(prefix)
        records.append(_parse_record(line))
    if parallelism > 1:
        assert prefixes == {"1", "2"}
    _check_counts(records, _expected(small_text))
    assert re.search(r"^Reduce -> Sink: Print to Std\. Out\s+" + str(parallelism) + r"\s+([\d,]+)\s",
                     proc.stderr, re.MULTILINE), proc.stderr
    assert list(tmp_path.iterdir()) == []  # printing writes no files


def test_cli_dynamic_properties_reach_the_job(tmp_path, small_text):
    """``rill run -D key=value`` sets the job's configuration, as ``flink run -D``: here a channel
    timeline (a relative directory: the client's working directory) and a bad value refused."""
    proc = subprocess.run(
        [RILL, "run", "--no-progress", "-p", "2", "-D", "rill.network.timeline.interval=5",
         "-D", "rill.network.timeline.dir=tl", "-m", "rill.examples.word_count", "--", "--input", str(small_text)],
        cwd=tmp_path, capture_output=True, text=True, encoding="utf-8", timeout=120,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    [job_dir] = list((tmp_path / "tl").iterdir())
    assert re.fullmatch(r"[0-9a-f]{32}", job_dir.name)
    # embedded: only the source chain has outputs (local channels in, nothing to sample for the sink)
    assert sorted(p.name for p in job_dir.iterdir()) == [
        "Source_Custom_File_Source_-_FlatMap_-_Map_1_2_-attempt0.parquet",
        "Source_Custom_File_Source_-_FlatMap_-_Map_2_2_-attempt0.parquet"]
    bad = subprocess.run([RILL, "run", "-D", "no-equals-sign", "-m", "rill.examples.word_count"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "-D expects KEY=VALUE, got 'no-equals-sign'" in bad.stderr
