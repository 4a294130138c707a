"""Fixtures shared across the test tree: real local clusters (Thespian actor systems started by
the ``rill cluster`` command in their own run directory and port, stopped afterwards with a
check that none of their processes is left)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rill.runtime.cluster.process_name import POOLED, process_name

RILL = str(Path(sys.executable).parent / "rill")


def _descendants(pid: int) -> set:
    children = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, frontier = set(), [pid]
    while frontier:
        p = frontier.pop()
        for c in children.get(p, []):
            if c not in out:
                out.add(c)
                frontier.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalCluster:
    """A cluster started with ``rill cluster start`` in its own run directory."""

    def __init__(self, run_dir: Path, task_executors: int = 2, slots: int = 2, extra_env=None):
        self.run_dir = run_dir
        self.port = free_port()
        self.task_executors = task_executors
        self.slots = slots
        self.env = {**os.environ, "RILL_RUN_DIR": str(run_dir), **(extra_env or {})}
        self.pids: set = set()
        self.members: list = []

    @property
    def out_file(self) -> Path:
        """The cluster processes' stdout (``print()`` of its tasks)."""
        return self.run_dir / f"cluster-{self.port}.out"

    @property
    def log_file(self) -> Path:
        """The cluster's log: its actors' log records and its processes' stderr."""
        return self.run_dir / f"cluster-{self.port}.log"

    @property
    def address(self) -> str:
        return f"cluster://127.0.0.1:{self.port}"

    def cli(self, *args, timeout=120, check=True) -> subprocess.CompletedProcess:
        proc = subprocess.run([RILL, *args], env=self.env, capture_output=True, text=True, timeout=timeout,
                              cwd=self.run_dir)
        if check and proc.returncode != 0:
            raise AssertionError(f"rill {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    @property
    def secret_file(self) -> Path:
        """The leader's cluster-<port>.json (mode 600): what clients and members need to join."""
        return self.run_dir / f"cluster-{self.port}.json"

    def environment(self, parallelism: int = 2, **options):
        """A StreamExecutionEnvironment whose jobs run on this cluster (submitted with its
        secret file) at ``parallelism``; ``options`` are more configuration settings, passed as
        ``**{"taskmanager.network.records-per-buffer": "32"}``."""
        from rill.common import Configuration  # noqa: PLC0415 - most tests never build a job
        from rill.common.configuration import ConfigOptions  # noqa: PLC0415
        from rill.datastream import StreamExecutionEnvironment  # noqa: PLC0415
        conf = Configuration()
        conf.set(ConfigOptions.EXECUTION_TARGET, self.address)
        conf.set(ConfigOptions.SECURITY_CLUSTER_SECRET_FILE, str(self.secret_file))
        for key, value in options.items():
            conf.set_string(key, value)
        env = StreamExecutionEnvironment.get_execution_environment(conf)
        env.set_parallelism(parallelism)
        return env

    def info(self, port=None) -> dict:
        return json.loads((self.run_dir / f"cluster-{port or self.port}.json").read_text())

    def start(self) -> "LocalCluster":
        for attempt in range(3):
            proc = self.cli("cluster", "start", "--port", str(self.port), "-n", str(self.task_executors),
                            "-s", str(self.slots), check=False)
            if proc.returncode == 0:
                break
            if "is in use" not in proc.stderr or attempt == 2:
                raise AssertionError(f"rill cluster start --port {self.port} exited {proc.returncode}:\n"
                                     f"{proc.stdout}\n{proc.stderr}")
            # free_port's race: another process bound the port between its check and the start
            self.port = free_port()
        self.remember_processes()
        return self

    def join(self, slots: int = 1) -> int:
        port = free_port()
        self.cli("cluster", "join", "--leader", self.address, "--port", str(port), "-s", str(slots),
                 "--secret-file", str(self.secret_file))
        self.members.append(port)
        self.remember_processes()
        return port

    def remember_processes(self) -> None:
        for port in [self.port, *self.members]:
            admin = self.info(port)["admin_pid"]
            assert admin > 0, "rill cluster start must record the admin pid"
            self.pids |= {admin} | _descendants(admin)

    def task_executor_pids(self) -> dict:
        out = self.cli("cluster", "status", "--port", str(self.port)).stdout
        pids = {}
        for line in out.splitlines():
            parts = line.split()
            if parts and parts[0].startswith("taskexecutor-"):
                pids[parts[0]] = int(parts[parts.index("pid") + 1])
        return pids

    @property
    def pool_size(self) -> int:
        """Each TaskExecutor's ``taskmanager.python.task-process-pool.size``."""
        from rill.common.configuration import ConfigOptions  # noqa: PLC0415 - see env()
        option = ConfigOptions.TASK_PROCESS_POOL_SIZE
        return int(self.env.get(option.env_var, option.default))

    def task_processes(self, task_executor_pids=None) -> set:
        """Live processes under the TaskExecutors that run or ran a task of a job (one per
        deployed task), not those waiting in a TaskExecutor's pool, never used by a job
        (named ``rill-pooled``: :mod:`rill.runtime.cluster.process_name`);
        ``task_executor_pids`` saves asking the cluster for them (a CLI call) when they are
        known."""
        out = set()
        for pid in task_executor_pids or self.task_executor_pids().values():
            out |= {p for p in _descendants(pid) if _alive(p) and process_name(p) != POOLED}
        return out

    def pooled_processes(self, task_executor_pid: int) -> set:
        """The live processes in the pool of the TaskExecutor ``task_executor_pid``."""
        return {p for p in _descendants(task_executor_pid) if _alive(p) and process_name(p) == POOLED}

    def wait_no_task_processes(self, timeout_s: float = 15.0, task_executor_pids=None) -> None:
        """Every task process of finished jobs exits (nothing is left after a job but each
        TaskExecutor's pool, at most ``pool_size`` processes that never ran a task)."""
        tes = list(task_executor_pids or self.task_executor_pids().values())
        deadline = time.monotonic() + timeout_s
        while (left := self.task_processes(tes)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not left, f"task processes left after the job ended: {sorted(left)}"
        for te in tes:
            pooled = self.pooled_processes(te)
            assert len(pooled) <= self.pool_size, f"TaskExecutor {te} pools {sorted(pooled)}, more than {self.pool_size}"

    def cancel_running_jobs(self) -> None:
        """Cancel every job of this cluster that has not ended and wait (15 s at most) for
        their task processes: after a test failed with a job still running, the tests that
        share the cluster start on a clean one instead of failing its leftover check too."""
        from rill.runtime.cluster.client import ClusterClient  # noqa: PLC0415 - only after a failure
        client = ClusterClient("127.0.0.1", self.port, bytes.fromhex(self.info()["secret_hex"]))
        for job_id, _name, status, _submitted, ended in client.overview().jobs:
            if ended is None:
                client.cancel(job_id)
        deadline = time.monotonic() + 15
        while self.task_processes() and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop(self) -> None:
        self.remember_processes_silently()
        for port in [*self.members, self.port]:
            self.cli("cluster", "stop", "--port", str(port), check=False)
        deadline = time.monotonic() + 15
        while any(_alive(p) for p in self.pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [p for p in self.pids if _alive(p)]
        for p in left:  # never leave anything behind, even when the check below fails
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        assert not left, f"processes left running after `rill cluster stop`: {left}"

    def remember_processes_silently(self) -> None:
        for pid in list(self.pids):
            self.pids |= _descendants(pid)


@pytest.fixture
def local_cluster(tmp_path):
    """A factory of private clusters for tests that kill or reshape them; each is stopped (and
    checked for leftover processes) when the test ends."""
    started = []

    def make(task_executors: int = 2, slots: int = 2, **kwargs) -> LocalCluster:
        c = LocalCluster(tmp_path / f"cluster-{len(started)}", task_executors, slots, **kwargs)
        c.run_dir.mkdir()
        started.append(c)
        return c.start()

    yield make
    for c in started:
        c.stop()


#: The shared cluster of the two-mode ``env`` fixture: 2 TaskExecutors x 4 slots. Slot sharing
#: puts subtask i of every vertex of a group in slot i, so a job needs as many slots as its
#: largest parallelism per slot sharing group (the tests use up to 4, plus a second group).
SHARED_TASK_EXECUTORS, SHARED_SLOTS = 2, 4

EXECUTION_MODES = ("embedded", "cluster")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "embedded_only(reason): the test inspects in-process objects of the job, so it runs "
                   "only in the embedded mode of the ``env`` fixture (the reason says which)")
    config.addinivalue_line(
        "markers", "spark: the test reads files with a real local SparkSession (the session-scoped "
                   "``spark`` fixture; pyspark is in the ``test`` extra). Select with -m spark")


# first: pytest-xdist's worker hook turns ``xdist_group`` markers into node-id suffixes
# (``@spark``) in its own pytest_collection_modifyitems, which otherwise ran before this one
# added them, and every worker started its own SparkSession (three JVMs under ``-n 3``)
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Tests marked ``embedded_only`` keep only their ``embedded`` instance: the cluster instance
    is deselected (not skipped: it is not a test that could run)."""
    keep, drop = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        if (callspec is not None and callspec.params.get("execution_mode") == "cluster"
                and item.get_closest_marker("embedded_only") is not None):
            drop.append(item)
        else:
            keep.append(item)
    for item in keep:
        marker = item.get_closest_marker("embedded_only")
        if marker is not None and not (marker.args or marker.kwargs.get("reason")):
            raise pytest.UsageError(f"{item.nodeid}: embedded_only needs a one-line reason")
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()) or item.get_closest_marker("spark"):
            # under pytest-xdist (``--dist loadgroup``) every Spark test goes to one worker: one
            # SparkSession per run, not one JVM per worker
            item.add_marker(pytest.mark.xdist_group("spark"))


@pytest.fixture(scope="session")
def shared_cluster(tmp_path_factory):
    """The cluster every ``cluster`` instance of the ``env`` fixture runs its jobs on: started
    once, on first use (an embedded-only run starts none), stopped at the end of the session
    with a check that none of its processes is left."""
    c = LocalCluster(tmp_path_factory.mktemp("shared-cluster"), SHARED_TASK_EXECUTORS, SHARED_SLOTS)
    c.start()
    c.shared_task_executor_pids = list(c.task_executor_pids().values())
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(params=EXECUTION_MODES)
def execution_mode(request, monkeypatch):
    """``embedded`` or ``cluster``. For ``cluster``, every environment the test creates
    submits to the shared cluster: ``RILL_EXECUTION_TARGET`` names it (``cluster://host:port``,
    read when an environment is created) and ``RILL_RUN_DIR`` is its run directory; after the
    test, every task process its jobs started must have exited."""
    if request.param != "cluster":
        yield request.param
        return
    c = request.getfixturevalue("shared_cluster")
    monkeypatch.setenv("RILL_RUN_DIR", str(c.run_dir))
    monkeypatch.setenv("RILL_EXECUTION_TARGET", c.address)
    yield request.param
    # nothing a test's jobs started may outlive it (a cancelled or failed job included)
    try:
        c.wait_no_task_processes(task_executor_pids=c.shared_task_executor_pids)
    except AssertionError:
        c.cancel_running_jobs()
        raise


@pytest.fixture
def env(execution_mode):
    """A fresh environment with parallelism 1, in each execution mode (ids ``embedded`` and
    ``cluster``): the same job must give the same result in both."""
    # imported here: this conftest loads for every test, most of which never build a job
    from rill.datastream import StreamExecutionEnvironment  # noqa: PLC0415
    e = StreamExecutionEnvironment.get_execution_environment()
    e.set_parallelism(1)
    return e


@pytest.fixture
def printed(execution_mode, capfd, request):
    """``printed()`` returns what the test and its jobs wrote to standard output so far (and
    not returned by an earlier call): the process's stdout in the embedded mode; in the cluster
    mode, the process's own stdout followed by what was appended to the cluster's ``.out`` file
    in its run directory, where the README says the ``print()`` output of cluster tasks goes
    (tests run one at a time, so the new text is this test's)."""
    if execution_mode == "embedded":
        return lambda: capfd.readouterr().out
    out_file = request.getfixturevalue("shared_cluster").out_file
    offset = [out_file.stat().st_size]

    def read() -> str:
        with open(out_file, "rb") as f:
            f.seek(offset[0])
            data = f.read()
        offset[0] += len(data)
        return capfd.readouterr().out + data.decode()
    return read


@pytest.fixture(scope="session")
def cluster(shared_cluster):
    """The session's shared cluster, for tests that drive it directly (CLI, status, cancel)."""
    return shared_cluster


#: A Java 17 for Spark (another Java may be the default on the machine).
_JAVA_17 = "/usr/lib/jvm/java-17-openjdk-amd64"


def _spark_worker_coverage_config():
    """Under the coverage command: the configuration this process measures with (coverage's
    ``subprocess`` patch passes it to every subprocess as ``COVERAGE_PROCESS_CONFIG``) plus the
    ``_exit`` patch, for Spark's Python workers only. pyspark's daemon forks a worker per Python
    task slot and ends it with ``os._exit``, which saves nothing unpatched; each worker saves
    into the daemon's data file (coverage adds the lines of all). Not in ``setup.cfg``: every
    process the cluster forks ends with ``os._exit`` too (multiprocessing), and would save its
    inherited ancestors' data again. ``None`` when coverage is not measuring."""
    serialized = os.environ.get("COVERAGE_PROCESS_CONFIG")
    if serialized is None:
        return None
    from coverage.config import CoverageConfig  # noqa: PLC0415 - only under the coverage command

    config = CoverageConfig.deserialize(serialized)
    config.patch = sorted(set(config.patch) | {"_exit"})
    return config.serialize()


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local SparkSession (``local[2]``: Spark jobs of ``execution.target: spark`` run two
    subtasks at once; UTC session time zone, warnings only) shared by every Spark test of the
    run, stopped at its end. Starting one takes ~10 s: keep Spark tests on
    this fixture. pyspark is in the ``test`` extra: a missing one fails, it never skips."""
    from pyspark.sql import SparkSession  # noqa: PLC0415 - only the Spark tests start a JVM

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        # the workers' base temporary directories share a parent: the first worker to start a
        # SparkSession claims it, and a second one means ``--dist loadgroup`` did not group
        claim = tmp_path_factory.getbasetemp().parent / "spark-session-worker"
        try:
            fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            pytest.fail(f"{worker} would start a second SparkSession in this run ({claim.read_text()} "
                        "started one): the xdist_group('spark') marker did not group the Spark tests "
                        "on one worker (pytest-xdist's loadgroup needs pytest < 9.2, see setup.cfg)")
        with os.fdopen(fd, "w") as f:
            f.write(worker)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    if Path(_JAVA_17).is_dir():
        os.environ["JAVA_HOME"] = _JAVA_17
    work = tmp_path_factory.mktemp("spark")
    builder = SparkSession.builder
    worker_coverage = _spark_worker_coverage_config()
    if worker_coverage is not None:
        builder = builder.config("spark.executorEnv.COVERAGE_PROCESS_CONFIG", worker_coverage)
    session = (builder.master("local[2]").appName("rill-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", "1")
               .config("spark.local.dir", str(work))
               .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={work}")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
