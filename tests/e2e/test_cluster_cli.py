"""The ``rill`` command around cluster jobs (issue 10, "A CLI that cannot hurt and does not
mislead"): version and help, the job id at submission, ``rill list`` times, ``rill cancel`` of
a running and of a finished job, Ctrl-C on ``rill run --target cluster``, the cluster log's job
events, and where ``print()`` output went.

Real clusters (``local_cluster``), real ``rill`` subprocesses (output to files, as long-running
ones must not fill a pipe), synchronization by polling with deadlines.
"""

from __future__ import annotations

import importlib.metadata
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

RILL = str(Path(sys.executable).parent / "rill")
JOB_ID = r"[0-9a-f]{32}"

# a job that runs until cancelled (one record per 10 ms, so it costs no CPU)
ENDLESS_JOB = """
import time
from rill.datastream import StreamExecutionEnvironment
env = StreamExecutionEnvironment.get_execution_environment()
env.from_sequence(0, 10**12).map(lambda x: time.sleep(0.01) or x).add_sink(lambda x: None)
env.execute("Endless")
"""


def rill(cwd, env, *args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([RILL, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def wait_until(predicate, what, timeout_s: float = 60.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what()}")


class Background:
    """``rill run`` in the background with its output in files."""

    def __init__(self, tmp_path: Path, env: dict, *args: str):
        self.out, self.err = tmp_path / "run.out", tmp_path / "run.err"
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen([RILL, *args], cwd=tmp_path, env=env, stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL)

    def stderr(self) -> str:
        return self.err.read_text()

    def job_id(self) -> str:
        found = wait_until(lambda: re.search(rf"rill: job 'Endless' \(({JOB_ID})\) submitted to ", self.stderr()),
                           lambda: f"the submission line in {self.stderr()!r}")
        return found.group(1)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def background():
    started = []

    def start(*args, **kwargs) -> Background:
        b = Background(*args, **kwargs)
        started.append(b)
        return b

    yield start
    for b in started:
        b.kill()


def job_line(cluster, job_id: str) -> str:
    listing = cluster.cli("list", "--port", str(cluster.port)).stdout
    return next((line for line in listing.splitlines() if job_id in line), "")


def test_version():
    proc = rill(".", None, "--version")
    assert (proc.returncode, proc.stdout) == (0, f"rill {importlib.metadata.version('rill')}\n")


@pytest.mark.parametrize("command", ["run", "plan", "cluster", "cancel", "list", "info"])
def test_every_subcommand_has_help_text(command):
    proc = rill(".", None, command, "--help")
    assert proc.returncode == 0, proc.stderr
    usage, description = proc.stdout.split("\n\n")[:2]
    assert usage.startswith(f"usage: rill {command} ")
    assert not description.startswith(("positional arguments:", "options:")), proc.stdout  # says what it does
    assert proc.stdout.count("show this help message and exit") == 1


def test_job_id_at_submission_in_both_modes_and_rill_list_times(local_cluster, tmp_path):
    cluster = local_cluster(1, 1)
    (tmp_path / "in.txt").write_text("a b a\n")
    ids = {}
    for target, where in (("embedded", "the embedded cluster"), (cluster.address, cluster.address)):
        proc = rill(tmp_path, cluster.env, "run", "--target", target, "-m", "rill.examples.word_count", "--",
                    "--input", "in.txt")
        assert proc.returncode == 0, proc.stderr
        found = re.search(rf"^rill: job 'WordCount' \(({JOB_ID})\) submitted to (.*)$", proc.stderr, re.M)
        assert found and found.group(2) == where, proc.stderr
        ids[target] = found.group(1)
    line = job_line(cluster, ids[cluster.address])
    assert re.fullmatch(rf"  {ids[cluster.address]}  FINISHED   started \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d  "
                        rf"duration +\d+\.\d s  WordCount", line), line


def test_cancel_of_a_finished_job_says_so_and_fails(local_cluster, tmp_path):
    cluster = local_cluster(1, 1)
    (tmp_path / "in.txt").write_text("a\n")
    proc = rill(tmp_path, cluster.env, "run", "--target", cluster.address, "-m", "rill.examples.word_count", "--",
                "--input", "in.txt")
    job_id = re.search(rf"\(({JOB_ID})\) submitted", proc.stderr).group(1)
    cancel = cluster.cli("cancel", job_id, "--port", str(cluster.port), check=False)
    assert (cancel.returncode, cancel.stdout, cancel.stderr) == (
        1, "", f"rill: job {job_id} had already ended: FINISHED; nothing to cancel\n")
    unknown = cluster.cli("cancel", "0" * 32, "--port", str(cluster.port), check=False)
    assert (unknown.returncode, unknown.stderr) == (1, f"rill: the cluster knows no job {'0' * 32}\n")


def test_rill_cancel_of_a_running_job_waits_for_it_and_says_how_it_ended(local_cluster, tmp_path, background):
    cluster = local_cluster(1, 1)
    (tmp_path / "endless.py").write_text(ENDLESS_JOB)
    run = background(tmp_path, cluster.env, "run", "--target", cluster.address, "--no-progress", "endless.py")
    job_id = run.job_id()
    wait_until(lambda: " RUNNING " in job_line(cluster, job_id), lambda: job_line(cluster, job_id))
    cancel = cluster.cli("cancel", job_id, "--port", str(cluster.port), check=False)
    assert (cancel.returncode, cancel.stdout, cancel.stderr) == (
        0, f"rill: cancelling job {job_id}\nrill: job {job_id} CANCELED\n", "")
    assert run.proc.wait(60) == 1  # the program's execute() raised: its job was cancelled
    assert " CANCELED " in job_line(cluster, job_id)
    cluster.wait_no_task_processes()


@pytest.mark.parametrize("progress", [[], ["--no-progress"]], ids=["progress-bar", "no-progress"])
def test_ctrl_c_on_rill_run_cancels_the_cluster_job(local_cluster, tmp_path, background, progress):
    cluster = local_cluster(1, 1)
    (tmp_path / "endless.py").write_text(ENDLESS_JOB)
    run = background(tmp_path, cluster.env, "run", "--target", cluster.address, *progress, "endless.py")
    job_id = run.job_id()
    wait_until(lambda: " RUNNING " in job_line(cluster, job_id), lambda: job_line(cluster, job_id))
    run.proc.send_signal(signal.SIGINT)
    assert run.proc.wait(60) == 130
    lines = run.stderr().splitlines()
    assert lines[-2:] == [
        f"rill: interrupted: cancelling job {job_id} on {cluster.address} (Ctrl-C again to leave it running)",
        f"rill: job {job_id} CANCELED"], run.stderr()
    assert " CANCELED " in job_line(cluster, job_id)
    cluster.wait_no_task_processes()


def test_the_cluster_log_records_job_events_at_info_not_each_task(local_cluster, tmp_path):
    cluster = local_cluster(1, 2)
    (tmp_path / "in.txt").write_text("a b a\n")
    (tmp_path / "bad.py").write_text(
        "from rill.datastream import StreamExecutionEnvironment\n"
        "def parse(x):\n"
        "    raise ValueError(f'bad record {x}')\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "env.from_collection([1]).map(parse).add_sink(lambda x: None)\n"
        "env.execute('Bad')\n")
    ok = rill(tmp_path, cluster.env, "run", "--target", cluster.address, "-p", "2", "-m", "rill.examples.word_count",
              "--", "--input", "in.txt")
    bad = rill(tmp_path, cluster.env, "run", "--target", cluster.address, "bad.py")
    assert (ok.returncode, bad.returncode) == (0, 1)
    ok_id = re.search(rf"\(({JOB_ID})\) submitted", ok.stderr).group(1)
    bad_id = re.search(rf"\(({JOB_ID})\) submitted", bad.stderr).group(1)
    log = cluster.run_dir / f"cluster-{cluster.port}.log"

    def events():
        found = re.findall(rf" INFO rill\.cluster\.dispatcher (job (?:{ok_id}|{bad_id}) .*)$", log.read_text(), re.M)
        return found if len(found) >= 6 else None

    assert wait_until(events, lambda: log.read_text()) == [
        f"job {ok_id} (WordCount) submitted",
        f"job {ok_id} (WordCount) is RUNNING",
        f"job {ok_id} (WordCount) is FINISHED",
        f"job {bad_id} (Bad) submitted",
        f"job {bad_id} (Bad) is RUNNING",
        f"job {bad_id} (Bad) FAILED: Job 'Bad' ({bad_id}) failed: operator 'Map' in task "
        f"'Source: Collection Source -> Map -> Sink: Unnamed (1/1)' raised ValueError: bad record 1",
    ]
    assert not [line for line in log.read_text().splitlines() if " INFO " in line and "DeployTask" in line]


def test_rill_run_says_where_print_output_of_a_cluster_job_went(local_cluster, tmp_path):
    """print() of cluster tasks goes to the .out file and only there; what the cluster's
    processes write to stderr goes to the cluster's log (the README's cluster section)."""
    cluster = local_cluster(1, 1)
    (tmp_path / "printing.py").write_text(
        "import sys\n"
        "from rill.datastream import StreamExecutionEnvironment\n"
        "def warn(x):\n"
        "    print('written-to-stderr-by-the-task', file=sys.stderr)\n"
        "    return x\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "env.from_collection(['printed-by-the-task']).map(warn).print()\n"
        "env.execute('Printing')\n")
    proc = rill(tmp_path, cluster.env, "run", "--target", cluster.address, "printing.py")
    assert proc.returncode == 0, proc.stderr
    out_file = cluster.out_file
    assert proc.stderr.splitlines()[-2] == (
        f"rill: the job's print() output went to the cluster's stdout, {out_file} "
        "(as Flink's TaskManager .out files), not to this terminal")
    assert "printed-by-the-task" not in proc.stdout
    # the .out file holds the start command's two lines, then exactly what the task printed
    wait_until(lambda: "printed-by-the-task" in out_file.read_text(), lambda: out_file.read_text())
    assert out_file.read_text().splitlines()[2:] == ["printed-by-the-task"]
    wait_until(lambda: "written-to-stderr-by-the-task" in cluster.log_file.read_text().splitlines(),
               lambda: cluster.log_file.read_text())
    embedded = rill(tmp_path, cluster.env, "run", "printing.py")
    assert "printed-by-the-task" in embedded.stdout and "print() output went" not in embedded.stderr
    assert "written-to-stderr-by-the-task" in embedded.stderr


def test_remote_tracebacks_show_the_program_file_and_line(local_cluster, tmp_path):
    """cloudpickle ships the program's functions by value and used to name their file
    ``<dynamic-code>``; the user's frames now show the file, the line and its source."""
    cluster = local_cluster(1, 1)
    job = tmp_path / "job.py"
    job.write_text(
        "from rill.datastream import StreamExecutionEnvironment\n"
        "def parse(x):\n"
        "    raise ValueError(f'bad record {x}')\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "env.from_collection([1]).map(parse).add_sink(lambda x: None)\n"
        "env.execute('Bad')\n")
    for target in (cluster.address, "embedded"):
        proc = rill(tmp_path, cluster.env, "run", "--target", target, "job.py")
        assert proc.returncode == 1
        assert "<dynamic-code>" not in proc.stderr
        assert f'  File "{job}", line 3, in parse\n    raise ValueError(f\'bad record {{x}}\')\n' in proc.stderr, \
            proc.stderr
    assert "Remote traceback (task Source: Collection Source -> Map -> Sink: Unnamed (1/1), pid " in proc.stderr \
        or target == "embedded"
