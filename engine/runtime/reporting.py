"""What ``rill run`` shows: a progress bar over bounded sources (tqdm) and a per-vertex
summary at the end."""

from __future__ import annotations

import sys
import time
from typing import Optional

# Imported here, not when the bar starts: an import in the client thread while task threads
# hold the GIL took as long as the whole job.
from tqdm import tqdm

from rill.runtime.metrics import backpressure_level

__all__ = ["run_progress_bar", "format_summary"]


def run_progress_bar(client, interval_s: float = 0.2) -> None:
    """Draw a bar of the sources' progress until the job ends. Units are whatever the sources
    count (bytes for files, records for collections); nothing is drawn when no source knows
    its total."""
    # no monitor thread: this loop refreshes the bar anyway
    tqdm.monitor_interval = 0
    done, total = client.get_source_progress()
    if not total:
        client.wait()
        return
    with tqdm(total=total, unit="B" if client.source_units_are_bytes() else "rec", unit_scale=True,
              desc="sources", file=sys.stderr, leave=True, dynamic_ncols=True) as bar:
        while not client.is_done():
            done, _ = client.get_source_progress()
            bar.n = min(done, total)
            bar.refresh()
            time.sleep(interval_s)
        done, _ = client.get_source_progress()
        bar.n = min(done, total)
        bar.refresh()


def format_checkpoint_line(stats) -> Optional[str]:
    """One line about a job's checkpoints from its ``CheckpointStatsSnapshot`` (``None``
    without checkpointing): counts, then the latest completed checkpoint's end-to-end duration,
    size and its slowest subtask's synchronous, asynchronous and alignment parts (ms), and, for
    an unaligned one, ``unaligned, <n> bytes in flight`` (the in-flight data it stored)."""
    if stats is None:
        return None
    c = stats.counts
    line = (f"Checkpoints: {c.number_of_completed_checkpoints} completed, {c.number_of_failed_checkpoints} failed, "
            f"{c.number_of_in_progress_checkpoints} in progress")
    latest = stats.latest_completed
    if latest is not None:
        line += (f"; latest #{latest.checkpoint_id}: {latest.end_to_end_duration_ms} ms, "
                 f"{latest.state_size_bytes:,} bytes, sync {latest.sync_checkpoint_duration_ms:.1f} ms, "
                 f"async {latest.async_checkpoint_duration_ms:.1f} ms, "
                 f"alignment {latest.alignment_duration_ms:.1f} ms")
        if latest.unaligned_checkpoint:
            line += f", unaligned, {latest.persisted_data_bytes:,} bytes in flight"
    return line


def format_summary(client) -> str:
    """A table: one row per vertex with parallelism, records in/out, duration, busy/idle/
    back-pressured ms per second and backpressure status; then the backpressure root cause
    (when a vertex is back-pressured), the job status and net runtime."""
    rows = client.get_vertex_summaries()
    header = (f"{'vertex':<48} {'p':>3} {'records in':>12} {'records out':>12} {'time s':>8} "
              f"{'busy':>6} {'idle':>6} {'bp':>6} {'cpu':>6}  status")
    lines = ["", f"Job '{client.get_job_name()}' ({client.get_job_id()}): {client.get_job_status().name}", header]
    for r in rows:
        dur_s = r.duration_ms / 1000.0
        per_s = (lambda ms: ms / dur_s if dur_s > 0 else 0.0)
        name = r.name if len(r.name) <= 48 else r.name[:45] + "..."
        bp = per_s(r.back_pressured_time_ms)
        lines.append(
            f"{name:<48} {r.parallelism:>3} {r.records_in:>12,} {r.records_out:>12,} {dur_s:>8.2f} "
            f"{per_s(r.busy_time_ms):>6.0f} {per_s(r.idle_time_ms):>6.0f} {bp:>6.0f} "
            f"{per_s(r.cpu_time_ms):>6.0f}  {backpressure_level(bp)}"
        )
    if getattr(client, "tasks_share_a_process", True):
        cpu_note = "tasks in one process share the GIL, so busy - cpu is mostly waiting for it"
    else:
        cpu_note = "each task is a process of its own on the cluster"
    lines.append("(busy / idle / bp / cpu: ms per second, averaged over the vertex's subtasks; "
                 f"cpu = the task thread's own CPU time — {cpu_note})")
    cause = client.get_backpressure_root_cause()
    if cause is not None:
        lines.append(f"Backpressure root cause: {cause.describe()}")
    checkpoints = format_checkpoint_line(client.get_checkpoint_stats())
    if checkpoints is not None:
        lines.append(checkpoints)
    net = client.get_net_runtime_ms()
    if net is not None:
        lines.append(f"Net runtime: {net} ms")
    return "\n".join(lines)
