"""Nexmark on Rill: the generator's determinism and parameters, the source's splits and replay,
and every query's exact output multiset against its plain-Python reference on 10,000 events
(embedded p=1 and p=2; the cluster mode for q0 and q5 through the two-mode ``env`` fixture).
No timing is asserted."""

import sys
from collections import Counter
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:  # bench/ is a top-level folder of the repository, not installed
    sys.path.insert(0, _ROOT)

from bench.nexmark.config import NexmarkConfiguration  # noqa: E402
from bench.nexmark.generator import block_events, generate_block, generate_events, num_blocks  # noqa: E402
from bench.nexmark.model import (AUCTION_LEN, BID_LEN, PERSON_LEN, Auction, Bid, Person,  # noqa: E402
                                 date_time, is_auction, is_bid, is_person)
from bench.nexmark.queries import QUERIES, build_query  # noqa: E402
from bench.nexmark.reference import reference  # noqa: E402
from bench.nexmark.source import NexmarkSource, NexmarkSplit, NexmarkSplitEnumerator, nexmark_watermark_strategy  # noqa: E402,E501
from rill.datastream import StreamExecutionEnvironment  # noqa: E402

#: 100 events/s of event time: 10,000 events span 100 s, so the 10 s windows, the 2 s slides
#: and the auctions' lifetimes (tens of seconds) all happen many times
CONFIG = NexmarkConfiguration(num_events=10_000, first_event_rate=100)


@pytest.fixture(scope="module")
def events():
    return list(generate_events(CONFIG))


def _run(env, query, config=CONFIG):
    stream = env.from_source(NexmarkSource(config), nexmark_watermark_strategy(config), "Nexmark")
    return list(build_query(query, stream, config).execute_and_collect())


# -- the generator ---------------------------------------------------------------------------

def test_generator_is_deterministic_with_nexmarks_proportions(events):
    assert events == list(generate_events(CONFIG))
    kinds = Counter(len(e) for e in events)
    assert kinds == {PERSON_LEN: 200, AUCTION_LEN: 600, BID_LEN: 9200}  # 1 : 3 : 46 of 10,000
    assert (PERSON_LEN, AUCTION_LEN, BID_LEN) == (8, 10, 7)
    # Beam's id arithmetic: the k-th person and auction get ids 1000 + k, in order
    assert [Person._make(p).id for p in events if is_person(p)] == list(range(1000, 1200))
    assert [Auction._make(a).id for a in events if is_auction(a)] == list(range(1000, 1600))
    # in order (group size 1): event n happens at base + n * 10 ms (100 events/s)
    assert [date_time(e) for e in events] == [CONFIG.base_time + 10 * n for n in range(10_000)]
    other = list(generate_events(NexmarkConfiguration(num_events=10_000, first_event_rate=100, seed=1)))
    assert other != events and Counter(len(e) for e in other) == kinds


def test_generated_values_follow_nexmarks_rules(events):
    bids = [Bid._make(e) for e in events if is_bid(e)]
    auctions = {a.id: a for a in map(Auction._make, filter(is_auction, events))}
    for a in auctions.values():
        assert 10 <= a.category <= 14 and a.expires > a.date_time and a.reserve > a.initial_bid >= 100
        assert a.seller >= 1000
    # hot auctions: about half of the bids go to the newest auction id rounded down to 100
    hot = sum(1 for b in bids if (b.auction - 1000) % 100 == 0)
    assert 0.45 < hot / len(bids) < 0.60, hot
    # hot bidders: about 3/4 (1 - 1/4) of the bids come from ids 1001, 1101, ...
    hot_bidders = sum(1 for b in bids if (b.bidder - 1000) % 100 == 1)
    assert 0.70 < hot_bidders / len(bids) < 0.80, hot_bidders
    assert all(100 <= b.price <= 100_000_000 for b in bids)
    # records pad to about their average size (bids: 100 bytes of fields, ±20% of the padding)
    sizes = [40 + len(b.channel) + len(b.url) + len(b.extra) for b in bids]
    assert 90 <= sum(sizes) / len(sizes) <= 110


def test_out_of_order_groups_permute_event_times_within_each_group():
    config = NexmarkConfiguration(num_events=3000, first_event_rate=1000, out_of_order_group_size=10)
    times = [date_time(e) for e in generate_events(config)]
    assert times != sorted(times)
    size = block_events(config)
    assert size % 10 == 0
    base = config.base_time
    # every group of 10 numbers holds exactly its own 10 event times (ms per event = 1)
    # (Beam's permutation (n * 953) % g is the identity for g = 7, as 953 = 1 mod 7)
    for g in range(0, 3000, 10):
        assert sorted(times[g:g + 10]) == [base + n for n in range(g, g + 10)]


def test_generate_block_rejects_a_block_outside_the_input():
    with pytest.raises(IndexError, match="block 10 is outside 0..9"):
        generate_block(CONFIG, num_blocks(CONFIG))


def test_configuration_rejects_bad_parameters():
    with pytest.raises(ValueError, match="first_event_rate must be >= 1, got 0"):
        NexmarkConfiguration(first_event_rate=0)
    with pytest.raises(ValueError, match="every proportion must be >= 1, got 1:0:46"):
        NexmarkConfiguration(auction_proportion=0)


# -- the source ------------------------------------------------------------------------------

def test_splits_are_round_robin_blocks_and_replay_from_any_position(events):
    source = NexmarkSource(CONFIG)
    splits = source.create_splits(3)
    assert splits == [NexmarkSplit(0, 3), NexmarkSplit(1, 3), NexmarkSplit(2, 3)]
    per_split = []
    for split in splits:
        reader = source.create_reader()
        per_split.append([e for batch in reader.read(split) for e in batch])
    assert Counter(e for s in per_split for e in s) == Counter(events)
    size = block_events(CONFIG)
    assert per_split[1][:size] == events[size:2 * size]  # split 1 starts with block 1
    for skip in (0, 1, size - 1, size, size + 5, 3 * size + 17, len(per_split[1])):
        reader = source.create_reader()
        resumed = [e for batch in reader.read_from(splits[1], skip) for e in batch]
        assert resumed == per_split[1][skip:], skip


def test_source_rejects_a_non_configuration():
    with pytest.raises(TypeError, match="NexmarkSource expects a NexmarkConfiguration, got 10000"):
        NexmarkSource(10_000)


# -- the queries against their references ----------------------------------------------------

EXACT = sorted(set(QUERIES) - {"q12"}, key=lambda q: int(q[1:]))


@pytest.mark.parametrize("parallelism", [1, 2])
@pytest.mark.parametrize("query", EXACT)
def test_query_output_equals_the_reference(query, parallelism, events):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    got = _run(env, query)
    expected = reference(query, events, CONFIG)
    assert expected, f"{query}: the reference is empty on this input, so the check would be vacuous"
    assert Counter(got) == Counter(expected)


@pytest.mark.parametrize("query", ["q0", "q5"])
def test_query_in_both_execution_modes(env, query, events):
    env.set_parallelism(2)
    assert Counter(_run(env, query)) == Counter(reference(query, events, CONFIG))


def test_q12_counts_each_bid_at_most_once_in_aligned_processing_time_windows(events):
    """q12's windows depend on processing time and, as in Flink, windows still open when the
    bounded input ends never fire (pending processing-time timers are dropped): so each
    bidder's counts add up to at most its bids, over aligned 10 s windows."""
    env = StreamExecutionEnvironment.get_execution_environment()
    config = NexmarkConfiguration(num_events=10_000, first_event_rate=100, window_size_sec=1)
    got = _run(env, "q12", config)
    per_bidder = Counter()
    for bidder, count, start, end in got:
        assert count > 0 and end - start == 1000 and start % 1000 == 0
        per_bidder[bidder] += count
    expected = dict(reference("q12", list(generate_events(config)), config))
    assert all(per_bidder[b] <= expected[b] for b in per_bidder), per_bidder


def test_unbuilt_and_unknown_queries_say_so():
    env = StreamExecutionEnvironment.get_execution_environment()
    stream = env.from_source(NexmarkSource(CONFIG), nexmark_watermark_strategy(CONFIG), "Nexmark")
    with pytest.raises(NotImplementedError, match="Nexmark q9 is not built on Rill"):
        build_query("q9", stream, CONFIG)
    with pytest.raises(ValueError, match="unknown Nexmark query 'q13'"):
        build_query("q13", stream, CONFIG)


# -- the benchmark's command line ------------------------------------------------------------

def test_benchmark_cli_prints_appends_parquet_and_plots(tmp_path, capsys):
    import pyarrow.parquet as pq
    from rill.cli import main as rill_main
    parquet, png = tmp_path / "results.parquet", tmp_path / "plot.png"
    argv = ["bench", "--repo", _ROOT, "nexmark", "--query", "q0", "--query", "q5", "--events", "5000",
            "--rate", "100", "--latency-sample-every", "10", "--parquet", str(parquet), "--plot", str(png)]
    assert rill_main(argv) == 0
    assert rill_main(argv[:4] + ["--query", "q2"] + argv[8:]) == 0
    rows = pq.read_table(parquet).to_pylist()
    assert [(r["query"], r["events"], r["parallelism"], r["target"]) for r in rows] == [
        ("q0", 5000, 1, "embedded"), ("q5", 5000, 1, "embedded"), ("q2", 5000, 1, "embedded")]
    config = NexmarkConfiguration(num_events=5000, first_event_rate=100)
    all_events = list(generate_events(config))
    assert [r["outputs"] for r in rows] == [len(reference(q, all_events, config)) for q in ("q0", "q5", "q2")]
    assert rows[0]["latency_samples"] == 9 + 4600 // 10 and rows[0]["latency_p99_ms"] >= rows[0]["latency_p50_ms"] >= 0
    assert all(r["events_per_s"] > 0 and r["events_per_s_per_core"] > 0 and r["peak_rss_bytes"] > 0 for r in rows)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = capsys.readouterr().out
    assert "| q5 | embedded | 1 | 5,000 |" in out and "Rill ÷ Flink per core" in out


def test_rill_bench_outside_a_checkout_says_where_it_looked(tmp_path, capsys):
    from rill.cli import main as rill_main
    assert rill_main(["bench", "--repo", str(tmp_path), "nexmark"]) == 2
    assert f"no bench/nexmark/ under {tmp_path}" in capsys.readouterr().err


def test_benchmark_with_checkpoints_gives_the_same_outputs(tmp_path):
    """``--checkpoint-interval-ms``: with exactly-once checkpoints enabled (every 50 ms) the
    query's outputs are the reference's. (How many checkpoints completed is not reported by
    the job's result; the checkpoint suites test checkpoints themselves.)"""
    from bench.nexmark.run import run_query
    config = NexmarkConfiguration(num_events=20_000, first_event_rate=100)
    row = run_query("q5", config, parallelism=1, checkpoint_interval_ms=50, sample_every=1)
    assert row["checkpoint_interval_ms"] == 50
    assert row["outputs"] == len(reference("q5", list(generate_events(config)), config))
    assert row["latency_samples"] > 0


def test_each_subtask_gets_only_its_own_split():
    """A subtask that asks again never takes another subtask's split (read after its own, it
    would be behind its watermark: q5 on the cluster once lost the late events' counts)."""
    enumerator = NexmarkSource(CONFIG).create_enumerator(2)
    assert enumerator.handle_split_request(0) == NexmarkSplit(0, 2)
    assert enumerator.handle_split_request(0) is None
    assert enumerator.snapshot_state(1) == [NexmarkSplit(1, 2)]
    restored = NexmarkSource(CONFIG).restore_enumerator(3, enumerator.snapshot_state(1))
    assert [restored.handle_split_request(i) for i in range(3)] == [None, NexmarkSplit(1, 2), None]
    assert isinstance(restored, NexmarkSplitEnumerator)
