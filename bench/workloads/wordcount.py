"""Keyed WordCount: NOTES.md's W1, Flink's streaming WordCount.

    lines → flat_map(split_words) → map(count_one) → key_by(word) → reduce(add_counts)
    → counting sink

The user functions are the WordCount example's (``rill.examples.word_count``): words are
maximal ``\\w+`` runs, lower-cased. The reduce is rolling: every updated ``(word, count)`` goes
to the sink (one sink record per word occurrence), and the loop does the same: a dict of
counts, updated through ``add_counts`` and emitted per word. The sink's checksum is the sum of
every emitted count (Σ n(n+1)/2 over words), so it checks the rolling semantics, not only the
number of words.

Input: the ``.py`` files of the running interpreter's standard library (test suite included,
``site-packages`` excluded), read in sorted path order, split into lines, and concatenated
until ``size`` lines (cycling if the library is shorter). The default, 540,000 lines, is about
the first 20 MB of CPython 3.11's library (real source text, Zipf-like word frequencies);
the figures depend on the Python version's library, which the README states.

At parallelism 1 Rill runs two tasks: "Source: Collection Source -> FlatMap -> Map" and
"Reduce -> Sink: Unnamed", connected by a hash (key-group) exchange through the local network
stack.

``WordCountWorkload(source=...)`` chooses how Rill reads the lines:

``"collection"`` (the default)
    ``from_collection``: a non-parallel source, as Flink's ``fromCollection``.
``"parallel"``
    :class:`ParallelLinesSource`: at parallelism P subtask *i* reads the *i*-th of P contiguous
    ranges of the list (at P = 1 the whole list, exactly as ``from_collection``), so the source
    is chained with the flat map in every subtask instead of one source subtask feeding P flat
    maps through a rebalance exchange. The lines travel inside the job (on a cluster: to every
    source task process, 21 MB at the default size).
``"file"``
    ``read_text_file`` of a directory of :data:`FILES` UTF-8 files holding the lines in order
    (written once per input, in a temporary directory removed by
    :meth:`WordCountWorkload.close` or at exit), as the WordCount example reads: nothing is
    shipped with the job, the hand-written loop reads the same files, and the subtasks ask
    for files (splits) as they finish the previous one, so 16 of them keep two subtasks within a sixteenth of each other (one 20 MB file cut
    in 4 MiB splits gave one subtask 3 of 5). The lines come back as written
    (``stdlib_lines`` never holds a line break).
"""

from __future__ import annotations

import atexit
import shutil
import sysconfig
import tempfile
from pathlib import Path
from operator import itemgetter
from typing import List, Optional, Tuple

from rill.datastream.connectors.collection import _CollectionReader, _RangeSplit
from rill.datastream.connectors.source import Source, SourceReader, SplitEnumerator
from rill.examples.word_count import add_counts, count_one, split_words

__all__ = ["WordCountWorkload", "WordCountSumWorkload", "ParallelLinesSource", "stdlib_lines", "word_of",
           "word_pairs", "FILES"]

#: How many files ``source="file"`` writes the lines into.
FILES = 16


def word_of(word_count: Tuple[str, int]) -> str:
    return word_count[0]


def word_pairs(line: str) -> List[Tuple[str, int]]:
    """``[(word, 1), ...]`` for the words of ``line`` (``split_words``): one call per line."""
    return [(w, 1) for w in split_words(line)]


def stdlib_lines(size: int) -> List[str]:
    """The first ``size`` lines of the standard library's ``.py`` files in sorted order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted((f for f in root.rglob("*.py") if "site-packages" not in f.parts),
                   key=lambda f: f.relative_to(root).as_posix())
    if not files:
        raise RuntimeError(f"no .py files under the standard library at {root}")
    lines: List[str] = []
    while len(lines) < size:
        for f in files:
            lines.extend(f.read_text(encoding="utf-8", errors="replace").splitlines())
            if len(lines) >= size:
                break
    del lines[size:]
    return lines


class _OneRangePerSubtask(SplitEnumerator):
    """Split *i* goes to subtask *i* (whoever asks first), then nothing."""

    def __init__(self, splits: List[_RangeSplit]):
        self._splits = dict(enumerate(splits))

    def handle_split_request(self, subtask_index: int) -> Optional[_RangeSplit]:
        return self._splits.pop(subtask_index, None)


class ParallelLinesSource(Source):
    """The elements of a list split across the source's subtasks: subtask *i* of P reads
    elements ``[n*i//P, n*(i+1)//P)`` in order, with the reader of ``from_collection``
    (batches of 1,024), so per record it costs what ``from_collection`` costs."""

    def __init__(self, elements: List[str]):
        self.elements = list(elements)

    def create_splits(self, parallelism: int) -> List[_RangeSplit]:
        n = len(self.elements)
        return [_RangeSplit(n * i // parallelism, n * (i + 1) // parallelism) for i in range(parallelism)]

    def create_enumerator(self, parallelism: int) -> SplitEnumerator:
        return _OneRangePerSubtask(self.create_splits(parallelism))

    def create_reader(self) -> SourceReader:
        return _CollectionReader(self.elements)

    def estimated_total_units(self) -> Optional[int]:
        return len(self.elements)


class WordCountWorkload:
    name = "wordcount"
    description = "lines → flat_map(split) → map((w, 1)) → key_by(w) → reduce(+) → counting sink"
    unit = "lines"
    default_size = 540_000
    target_ratio = 0.45  # issue 16 (the first benchmark issue asked for 0.35)

    SOURCES = ("collection", "parallel", "file")

    def __init__(self, source: str = "collection"):
        if source not in self.SOURCES:
            raise ValueError(f"WordCountWorkload: source must be one of {self.SOURCES}, got {source!r}")
        #: how Rill reads the lines (see the module's docstring)
        self.source_kind = source
        self._files: dict = {}  # id(data) -> (data, directory): the list is held, so its id stays its own

    def prepare(self, size: int) -> List[str]:
        return stdlib_lines(size)

    def source(self, env, data: List[str]):
        if self.source_kind == "parallel":
            return env.from_source(ParallelLinesSource(data), None, "Parallel Lines Source")
        if self.source_kind == "file":
            return env.read_text_file(self._file_of(data))
        return env.from_collection(data)

    def _file_of(self, data: List[str]) -> str:
        """The directory holding ``data``'s files (written on first use: one per input list,
        e.g. the full input and the marginal measurement's small one)."""
        known = self._files.get(id(data))
        if known is not None and known[0] is data:
            return known[1]
        directory = tempfile.mkdtemp(prefix="rill-bench-wordcount-")
        atexit.register(shutil.rmtree, directory, True)
        n = len(data)
        for i in range(FILES):
            with open(Path(directory) / f"lines-{i:02d}.txt", "w", encoding="utf-8", newline="") as f:
                f.writelines(line + "\n" for line in data[n * i // FILES:n * (i + 1) // FILES])
        self._files[id(data)] = (data, directory)
        return directory

    def materialize(self, data: List[str]) -> None:
        """Write ``data``'s files now (``source="file"``), so that no timed run pays for it."""
        if self.source_kind == "file":
            self._file_of(data)

    def _lines(self, data: List[str]):
        """What the loop reads: ``data`` itself, or with ``source="file"`` the lines of the
        files Rill reads (in order; each line without its ``\\n``, as ``read_text_file`` gives
        it), so that both sides pay for reading them."""
        return data if self.source_kind != "file" else self._file_lines(data)

    def _file_lines(self, data: List[str]):
        directory = Path(self._file_of(data))
        for i in range(FILES):
            with open(directory / f"lines-{i:02d}.txt", encoding="utf-8", newline="\n") as f:
                for line in f:
                    yield line[:-1]

    def close(self) -> None:
        """Remove the files written for ``source="file"`` (if any)."""
        for _, directory in self._files.values():
            shutil.rmtree(directory, ignore_errors=True)
        self._files.clear()

    def run_rill(self, env, data: List[str], sink) -> None:
        (self.source(env, data)
            .flat_map(split_words)
            .map(count_one)
            .key_by(word_of)
            .reduce(add_counts)
            .add_sink(sink))

    def run_baseline(self, data: List[str], sink) -> None:
        counts = {}
        get = counts.get
        invoke = sink.invoke
        for line in self._lines(data):
            for word in split_words(line):
                wc = count_one(word)
                key = word_of(wc)
                current = get(key)
                value = wc if current is None else add_counts(current, wc)
                counts[key] = value
                invoke(value, None)


class WordCountSumWorkload(WordCountWorkload):
    """W1 written with the built-in aggregation (issue 16):
    ``flat_map(word_pairs).key_by(itemgetter(0)).sum(1)``, where ``word_pairs`` is
    ``lambda l: [(w, 1) for w in split_words(l)]``. Same input, same output (every updated
    ``(word, count)``) and the *same* baseline as ``wordcount``: the hand-written loop calling
    ``split_words``, ``count_one``, ``word_of`` and ``add_counts`` per word."""

    name = "wordcount_sum"
    description = "lines → flat_map((w, 1) per word) → key_by(itemgetter(0)) → sum(1) → counting sink"
    target_ratio = 0.60

    def run_rill(self, env, data: List[str], sink) -> None:
        (self.source(env, data)
            .flat_map(word_pairs)
            .key_by(itemgetter(0))
            .sum(1)
            .add_sink(sink))


class TypedWordCountWorkload(WordCountWorkload):
    """``wordcount`` with its types declared, as a PyFlink program declares them
    (``output_type=``, ``key_type=``): the same functions, input and output; the reduce's state
    is then written in typed columns (``key`` string, ``value`` struct<f0: string, f1: bigint>)
    instead of msgpack per value. For the checkpoint benchmark (issue 11)."""

    name = "wordcount_typed"
    description = ("lines → flat_map(split) → map((w, 1), TUPLE(STRING, LONG)) → key_by(w, STRING) → "
                   "reduce(+) → counting sink")

    def run_rill(self, env, data: List[str], sink) -> None:
        from rill.common.typeinfo import Types  # noqa: PLC0415 - only this variant declares types
        (self.source(env, data)
            .flat_map(split_words, output_type=Types.STRING())
            .map(count_one, output_type=Types.TUPLE([Types.STRING(), Types.LONG()]))
            .key_by(word_of, key_type=Types.STRING())
            .reduce(add_counts)
            .add_sink(sink))
