"""Channel timelines (``rill.network.timeline.*``): a back-pressured job in both modes writes
one Parquet file per task whose rows show the slow consumer's channels without credit and the
producer's pool full, and whose last rows count exactly the records sent."""

from __future__ import annotations

import time

import pyarrow.parquet as pq
import pytest

from rill.runtime.taskmanager.channel_timeline import ChannelTimelineSettings, TIMELINE_SCHEMA
from rill.common import Configuration

N = 3000


def _slow(x):
    time.sleep(0.0005)  # the slow consumer: ~2,000 records/s


def test_back_pressured_job_writes_one_timeline_per_task(env, execution_mode, tmp_path):
    conf = env.get_configuration()
    conf.set_string("rill.network.timeline.interval", "5")
    conf.set_string("rill.network.timeline.dir", str(tmp_path))
    conf.set_string("taskmanager.network.records-per-buffer", "16")
    conf.set_string("rill.source.batch-size", "16")
    (env.from_collection(list(range(N))).name("Numbers")
        .map(lambda x: x).name("Identity").disable_chaining()
        .add_sink(_slow).name("Slow"))
    result = env.execute("timeline")
    [job_dir] = list(tmp_path.iterdir())
    assert job_dir.name == result.get_job_id()
    files = sorted(p.name for p in job_dir.iterdir())
    # embedded, the sink has only local input channels and no output: nothing to sample, no file
    assert files == ["Identity_1_1_-attempt0.parquet"] + (
        ["Sink_Slow_1_1_-attempt0.parquet"] if execution_mode == "cluster" else []) + [
        "Source_Numbers_1_1_-attempt0.parquet"]
    tables = {name.split("_")[0]: pq.read_table(job_dir / name) for name in files}
    for t in tables.values():
        assert t.schema.equals(TIMELINE_SCHEMA, check_metadata=False)

    source = tables["Source"].to_pylist()
    out = [r for r in source if r["side"] == "output"]
    assert out and {r["task_name"] for r in out} == {"Source: Numbers (1/1)"}
    assert out[-1]["records"] == N  # the last sample is taken when the task ends
    ident = tables["Identity"].to_pylist()
    ident_out = [r for r in ident if r["side"] == "output"]
    assert ident_out[-1]["records"] == N
    # the slow sink holds Identity's pool full at some sample (back-pressured)
    assert any(r["pool_used"] == r["pool_total"] and r["back_pressured"] for r in ident_out), ident_out[:20]
    ts = [r["ts"] for r in ident_out]
    assert ts == sorted(ts) and len(ts) >= 10

    if execution_mode == "cluster":  # remote channels: credit and the sender's backlog
        sink_in = [r for r in tables["Sink"].to_pylist() if r["side"] == "input"]
        assert sink_in and any(r["credit_available"] == 0 and r["backlog"] > 0 for r in sink_in), sink_in[:20]
        assert sink_in[-1]["buffers"] > 0
        # the sender's view of the same channel: out of credit while it had data
        assert any(r["credit_available"] == 0 and r["back_pressured"] for r in ident_out)


def test_settings_are_checked():
    assert ChannelTimelineSettings.from_configuration(Configuration()) is None
    conf = Configuration()
    conf.set_string("rill.network.timeline.interval", "-3")
    with pytest.raises(ValueError, match="rill.network.timeline.interval must be a whole number of ms >= 0, got -3"):
        ChannelTimelineSettings.from_configuration(conf)
    with pytest.raises(ValueError, match="at least 1 ms"):
        ChannelTimelineSettings(0, "x")
