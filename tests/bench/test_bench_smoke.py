"""Smoke test of the benchmark harness: every workload runs at a tiny size on Rill and on the
hand-written loop, and the harness's result check passes. Speed is never asserted here (the
benchmark itself states the ratios); a broken job must fail the check."""

import json
import sys
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:  # bench/ is a top-level folder of the repository, not installed
    sys.path.insert(0, _ROOT)

from bench import run as bench_run  # noqa: E402
from bench.harness import ResultMismatch, run_workload  # noqa: E402
from bench.harness import CountingSink, LoopSinkContext, WindowResultSink  # noqa: E402
from bench.workloads import (  # noqa: E402
    WORKLOADS,
    SlidingWindowsWorkload,
    StatelessWorkload,
    TumblingWindowsWorkload,
    WordCountWorkload,
)
from bench.workloads.stateless import to_euros  # noqa: E402
from bench.workloads.windows import (  # noqa: E402
    OUT_OF_ORDERNESS_MS,
    SLIDE_MS,
    WINDOW_MS,
    CountAndSum,
    event_key,
    generate_events,
    watermark_strategy,
)
from bench.workloads.wordcount import word_of  # noqa: E402
from rill.datastream.window import SlidingEventTimeWindows, TumblingEventTimeWindows  # noqa: E402
from rill.examples.word_count import count_one, split_words  # noqa: E402

TINY = {"stateless": 5_000, "wordcount": 400, "wordcount_sum": 400, "tumbling": 30_000, "sliding": 30_000}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
@pytest.mark.parametrize("parallelism", [1, 2])
def test_workload_results_match_the_loop(name, parallelism):
    workload = WORKLOADS[name]()
    data = workload.prepare(TINY[name])
    assert len(data) == TINY[name]
    m = run_workload(workload, data, repeat=1, parallelism=parallelism)
    assert m.records == TINY[name]
    assert m.sink_records > 0
    assert len(m.samples) == 1


def test_stateless_with_a_parallel_source_stays_chained_and_matches_the_loop():
    workload = StatelessWorkload(source="parallel")
    data = workload.prepare(TINY["stateless"])
    m = run_workload(workload, data, repeat=1, parallelism=2, warmup=False)
    assert m.sink_records > 0
    assert m.vertices == ["Source: Parallel Bids Source -> Map -> Filter -> Sink: Unnamed (p=2)"]
    with pytest.raises(ValueError, match="source must be one of"):
        StatelessWorkload(source="socket")


@pytest.mark.parametrize("parallelism", [1, 2])
def test_stateless_from_a_file_both_sides_read_stays_chained_and_matches_the_loop(parallelism):
    workload = StatelessWorkload(source="file")
    data = workload.prepare(TINY["stateless"])
    try:
        m = run_workload(workload, data, repeat=1, parallelism=parallelism, warmup=False)
        assert m.sink_records == sum(1 for bid in data if bid[0] % 123 == 0) > 0
        assert m.vertices == [f"Source: Bids File Source -> Map -> Filter -> Sink: Unnamed (p={parallelism})"]
    finally:
        workload.close()


@pytest.mark.parametrize("parallelism", [1, 2])
def test_tumbling_windows_from_a_file_both_sides_read_match_the_loop(parallelism):
    workload = TumblingWindowsWorkload(source="file")
    data = workload.prepare(TINY["tumbling"])
    try:
        m = run_workload(workload, data, repeat=1, parallelism=parallelism, warmup=False)
        assert m.sink_records > 0
        assert m.vertices[0] == f"Source: Events File Source -> Timestamps/Watermarks (p={parallelism})"
    finally:
        workload.close()
    with pytest.raises(ValueError, match="source must be one of"):
        TumblingWindowsWorkload(source="parallel")


def test_a_record_file_is_read_whole_in_order_by_the_loop_and_once_by_the_subtasks(tmp_path):
    from bench.workloads.record_file import BLOCK, RecordFile  # noqa: PLC0415
    records = [(i, -i, 10 ** 12 + i) for i in range(3 * BLOCK + 5)]
    f = RecordFile(records, "<iiq")
    try:
        assert [r for block in f.blocks() for r in block] == records
        source = f.source()
        for p in (1, 2, 3, 5):
            enumerator = source.create_enumerator(p)
            read = []
            for subtask in range(p):
                split = enumerator.handle_split_request(subtask)
                reader = source.create_reader()
                if split is not None:  # subtask i reads blocks i, i + p, ...
                    got = [r for batch in reader.read(split) for r in batch]
                    assert got[:BLOCK] == records[subtask * BLOCK:(subtask + 1) * BLOCK]
                    read.extend(got)
                    # a restore resumes at the checkpointed position, mid-block
                    assert [r for batch in reader.read_from(split, BLOCK + 7) for r in batch] == got[BLOCK + 7:]
                    reader.close()
                assert enumerator.handle_split_request(subtask) is None
            assert sorted(read) == records
    finally:
        f.close()


class _DropsTheFilter(StatelessWorkload):
    """A "Rill job" that forgets the filter: the check must catch it."""

    def run_rill(self, env, data, sink):
        env.from_collection(data).map(to_euros).add_sink(sink)


class _NoRollingReduce(WordCountWorkload):
    """Emits (word, 1) instead of the running count: same number of records, wrong values."""

    def run_rill(self, env, data, sink):
        env.from_collection(data).flat_map(split_words).map(count_one).key_by(word_of).add_sink(sink)


class _ShiftedWindows(TumblingWindowsWorkload):
    """Tumbling windows with an offset of half a window: about as many outputs, other windows."""

    def run_rill(self, env, data, sink):
        (env.from_collection(data).assign_timestamps_and_watermarks(watermark_strategy()).key_by(event_key)
            .window(TumblingEventTimeWindows.of(WINDOW_MS, WINDOW_MS // 2)).aggregate(CountAndSum())
            .add_sink(sink))


class _CountOnly(CountAndSum):
    def add(self, value, accumulator):
        return value[0], accumulator[1] + 1, accumulator[2]


class _WrongAggregate(SlidingWindowsWorkload):
    """Sliding windows whose aggregate forgets the sum: same outputs, same counts, wrong sums."""

    def run_rill(self, env, data, sink):
        (env.from_collection(data).assign_timestamps_and_watermarks(watermark_strategy()).key_by(event_key)
            .window(SlidingEventTimeWindows.of(WINDOW_MS, SLIDE_MS)).aggregate(_CountOnly())
            .add_sink(sink))


@pytest.mark.parametrize("broken", [_DropsTheFilter, _NoRollingReduce, _ShiftedWindows, _WrongAggregate])
def test_a_wrong_job_fails_the_check(broken):
    workload = broken()
    data = workload.prepare(TINY[workload.name])
    with pytest.raises(ResultMismatch, match=workload.name):
        run_workload(workload, data, repeat=1, warmup=False)


def test_cli_prints_the_table_and_json(tmp_path, capsys):
    out = tmp_path / "bench.json"
    code = bench_run.main(["--workload", "stateless", "--size", "3000", "--repeat", "1", "--no-warmup",
                           "--quiet", "--json", str(out)])
    assert code == 0
    assert "| stateless | 1 |" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["machine"]["nproc"] >= 1
    assert report["measurements"][0]["records"] == 3000


def test_window_workloads_promise_no_late_events():
    """Every event's timestamp is less than the out-of-orderness bound behind the greatest
    timestamp before it: no window an event belongs to can have fired, whatever the watermark
    timing, so Rill's results cannot depend on when its periodic watermarks come."""
    events = generate_events(200_000)
    max_seen = events[0][2]
    worst = 0
    for _, _, ts in events:
        worst = max(worst, max_seen - ts)
        max_seen = max(max_seen, ts)
    assert 0 < worst < OUT_OF_ORDERNESS_MS
    assert any(b[2] < a[2] for a, b in zip(events, events[1:]))  # really out of order


@pytest.mark.parametrize("workload", [TumblingWindowsWorkload, SlidingWindowsWorkload])
def test_window_loop_outputs_every_key_and_window(workload):
    """The loop's outputs, checked against a direct computation: per (key, window) the count
    and sum of its events, stamped with the window's max timestamp."""
    events = generate_events(12_000)
    sink = WindowResultSink("loop")
    workload().run_baseline(events, sink)
    slide = WINDOW_MS if workload is TumblingWindowsWorkload else SLIDE_MS
    expected = {}
    for key, value, ts in events:
        start = ts - ts % slide
        while start > ts - WINDOW_MS:
            k, n, total = expected.get((key, start + WINDOW_MS - 1), (key, 0, 0))
            expected[key, start + WINDOW_MS - 1] = (key, n + 1, total + value)
            start -= slide
    assert sorted(sink.checksum) == sorted((result, max_ts) for (_, max_ts), result in expected.items())


def test_window_result_sink_reads_the_timestamp():
    sink, context = WindowResultSink("t"), LoopSinkContext()
    context.ts = 9_999
    sink.invoke((7, 2, 30), context)
    assert (sink.count, sink.checksum) == (1, [((7, 2, 30), 9_999)])
    assert isinstance(sink, CountingSink)


def test_cpu_ratio_runs_both_sides_and_checks_them(capsys):
    from bench import cpu_ratio
    assert cpu_ratio.main(["--workload", "stateless", "--size", "5000", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("stateless: 5,000 records, best of 1: Rill "), out
    assert "loop ÷ Rill" in out


class _Figure:
    """A checksum marshal cannot write: the sink's file falls back to pickle."""

    def __init__(self, n):
        self.n = n

    def __eq__(self, other):
        return type(other) is _Figure and other.n == self.n


@pytest.mark.parametrize("published, kind", [
    ((3, 12, 1.5, 2.5), b"M"),                                             # CountingSink
    ((2, [((7, 1, 3), 1_700_000_009_999), ((8, 2, 5), 5)], None, None), b"M"),  # WindowResultSink
    ((1, _Figure(4), 1.0, 2.0), b"P"),
])
def test_a_cluster_sinks_published_figures_round_trip_through_its_file(published, kind, tmp_path):
    from bench.harness import _decode_published, _encode_published, take_result  # noqa: PLC0415
    data = _encode_published(published)
    assert data[:1] == kind and _decode_published(data) == published
    (tmp_path / "tok.a.pkl").write_bytes(data)
    got = take_result("tok", str(tmp_path))
    assert (got.count, got.checksum, got.instances) == (published[0], published[1], 1)
    assert not list(tmp_path.iterdir())
    with pytest.raises(ValueError, match="not a published sink result"):
        _decode_published(b"\x80" + data[1:])
