"""``rill info JOB_ID``: a job's detail read from the REST API, as a table (vertices,
parallelism, status, records in/out, backpressure level and ratios, the root cause).

The endpoint is ``--url`` or ``http://<rest.address>:<rest.port>`` from the configuration.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from typing import Dict, List, Optional

from rill.common.configuration import load_configuration
from rill.runtime.rest.options import RestOptions

__all__ = ["fetch_job_info", "format_job_info", "run_info_command"]


def _get(url: str) -> object:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        try:
            errors = json.loads(e.read()).get("errors", [])
        except ValueError:
            errors = []
        raise LookupError(f"{url}: HTTP {e.code}: {'; '.join(errors) or e.reason}") from None
    except urllib.error.URLError as e:
        raise OSError(f"cannot reach the REST endpoint at {url}: {e.reason}") from None


def fetch_job_info(base_url: str, job_id: str) -> Dict[str, object]:
    """``{"detail": /jobs/:jobid, "backpressure": {vertex id: .../backpressure}}``.

    :raises LookupError: for an HTTP error (message with Flink's ``errors``).
    :raises OSError: when the endpoint cannot be reached.
    """
    base = base_url.rstrip("/")
    detail = _get(f"{base}/jobs/{job_id}")
    bp = {v["id"]: _get(f"{base}/jobs/{job_id}/vertices/{v['id']}/backpressure") for v in detail["vertices"]}
    return {"detail": detail, "backpressure": bp}


def format_job_info(info: Dict[str, object]) -> str:
    """The table ``rill info`` prints; ``bp`` is the vertex's worst back-pressured ratio,
    ``busy`` its highest busy ratio."""
    d = info["detail"]
    lines = [f"Job '{d['name']}' ({d['jid']}): {d['state']}, {d['duration'] / 1000:.1f} s",
             f"{'vertex':<44} {'p':>3} {'status':<10} {'records in':>12} {'records out':>12} "
             f"{'busy':>5} {'bp':>5}  backpressure"]
    for v in d["vertices"]:
        bp = info["backpressure"][v["id"]]
        subs: List[dict] = bp["subtasks"]
        busy = max((s["busyRatio"] for s in subs), default=0.0)
        ratio = max((s["ratio"] for s in subs), default=0.0)
        name = v["name"] if len(v["name"]) <= 44 else v["name"][:41] + "..."
        m = v["metrics"]
        lines.append(f"{name:<44} {v['parallelism']:>3} {v['status']:<10} {m['read-records']:>12,} "
                     f"{m['write-records']:>12,} {busy:>5.2f} {ratio:>5.2f}  {bp['backpressure-level']}")
    cause = d.get("backpressure-root-cause")
    if cause:
        where = cause["vertex-name"] + ("" if cause["subtask"] is None else f" (subtask {cause['subtask']})")
        lines.append(f"Backpressure root cause: {where}, busy {cause['busyRatio']:.2f}; back-pressured: "
                     + ", ".join(cause["back-pressured-vertices"]))
    return "\n".join(lines)


def run_info_command(job_id: str, url: Optional[str]) -> int:
    """Print the job's table; 0, or 1 with a message on stderr when the job or endpoint is
    not there."""
    if url is None:
        conf = load_configuration()
        url = f"http://{conf.get_string(RestOptions.ADDRESS.key, RestOptions.ADDRESS.default)}:" \
              f"{conf.get_string(RestOptions.PORT.key, str(RestOptions.PORT.default))}"
    try:
        print(format_job_info(fetch_job_info(url, job_id)))
    except (LookupError, OSError) as e:
        print(f"rill info: {e}", file=sys.stderr)
        return 1
    return 0
