"""Issue 10, security: no listening socket of a running cluster or of its client deserializes a
byte from a peer that did not prove the cluster's secret.

The attack runs against every TCP port in LISTEN state that belongs to the cluster's process
tree (admin, Thespian's logger, Dispatcher, ResourceManager, TaskExecutors, the JobMaster,
StreamTask actors, the tasks' data-plane servers) or to the client process (its Thespian
endpoint and the collect server of ``execute_and_collect``), found through ``/proc/net/tcp`` and
the processes' file descriptors, while a job is in flight. Every port gets a pickle whose
loading would create a canary file (framed as Thespian, as the data plane and collect service,
and bare), huge length headers, and random bytes; each connection must be closed by the server,
the canary must never appear, the job must finish with its exact output, and each refusal must
be logged with the attacker's address.
"""

from __future__ import annotations

import logging
import os
import pickle
import random
import socket
import stat
import struct
import subprocess
import time
from pathlib import Path

from rill.common import Configuration, Types
from rill.common.configuration import ConfigOptions
from rill.datastream import StreamExecutionEnvironment
from rill.datastream.functions import MapFunction
from rill.network.netty import messages

from tests.conftest import RILL, _descendants, free_port


class _Canary:
    """Unpickling this runs ``touch <path>`` (what an attacker's pickle would do)."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


class WaitForGo(MapFunction):
    """Holds the job in flight: each subtask marks that it runs, then waits for the go file."""

    def __init__(self, directory: str):
        self.directory = directory

    def open(self, runtime_context):
        self.index = runtime_context.get_index_of_this_subtask()
        self.waited = False

    def map(self, value):
        if not self.waited:
            Path(self.directory, f"running-{self.index}").touch()
            deadline = time.monotonic() + 120
            while not Path(self.directory, "go").exists():  # the job's own gate, not test sync
                if time.monotonic() > deadline:
                    raise TimeoutError("the test never released the job")
                time.sleep(0.02)
            self.waited = True
        return value[0], value[1] * 10


def _listening_inodes() -> dict:
    """inode -> (host, port) of every TCP socket in LISTEN state on this machine."""
    out = {}
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if parts[3] != "0A":
                continue
            addr_hex, port_hex = parts[1].split(":")
            raw = bytes.fromhex(addr_hex)
            if family == socket.AF_INET:
                host = socket.inet_ntop(family, raw[::-1])
            else:
                host = socket.inet_ntop(family, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
            out[parts[9]] = (host, int(port_hex, 16))
    return out


def listening_ports(pids) -> dict:
    """(host, port) -> pids holding that listening socket, for the given processes."""
    inodes = _listening_inodes()
    ports: dict = {}
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                ports.setdefault(inodes[target[8:-1]], set()).add(pid)
    return ports


def _describe(pids) -> str:
    out = []
    for pid in sorted(pids):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            out.append(f"{pid} {cmdline[:80]}")
        except OSError:
            out.append(str(pid))
    return "; ".join(out)


def attacks(canary: Path):
    evil = pickle.dumps(_Canary(str(canary)))
    noise = random.Random(10).randbytes(4096)
    assert not noise[:1].isdigit() and struct.unpack(">I", noise[:4])[0] > 1 << 20  # refused at the header
    return {
        "pickle (Thespian framing)": b"%d>" % len(evil) + evil,
        "pickle (data-plane and collect framing)": struct.pack(">IB", len(evil) + 1, messages.HELLO) + evil,
        "pickle instead of the proof, after a valid Hello": (messages.encode_hello(messages.new_nonce(), True)
                                                              + struct.pack(">IB", len(evil) + 1, messages.AUTH)
                                                              + evil),
        "pickle (bare)": evil,
        "huge length header (Thespian)": b"%d>" % (1 << 40),
        "huge length header (digits, no end)": b"9" * 40,
        "huge length header (uint32)": b"\xff\xff\xff\xff\x01",
        "random bytes": noise,
    }


def send_and_expect_close(address, payload: bytes, timeout_s: float = 15.0) -> str:
    """Send ``payload`` and wait until the server closes the connection; returns our own
    ``host:port`` (what the server must log)."""
    family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(address)
        me = "%s:%d" % sock.getsockname()[:2]
        try:
            sock.sendall(payload)
        except OSError:  # closed on the first bytes already
            return me
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if not sock.recv(65536):
                    return me
            except socket.timeout:
                break
            except OSError:
                return me
        raise AssertionError(f"{address[0]}:{address[1]} kept the connection open after {payload[:20]!r}...")


def wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_no_listening_port_of_a_cluster_or_its_client_runs_an_unauthenticated_pickle(
        local_cluster, tmp_path, caplog):
    c = local_cluster(2, 2)
    gate = tmp_path / "gate"
    gate.mkdir()
    canary = tmp_path / "canary"
    conf = Configuration()
    conf.set(ConfigOptions.EXECUTION_TARGET, c.address)
    conf.set(ConfigOptions.SECURITY_CLUSTER_SECRET_FILE, str(c.secret_file))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    data = [(f"k{i % 5}", i) for i in range(200)]
    type_info = Types.TUPLE([Types.STRING(), Types.INT()])
    stream = (env.from_collection(data, type_info=type_info)
              .map(WaitForGo(str(gate)), output_type=type_info)
              .key_by(lambda kv: kv[0])
              .map(lambda kv: (kv[0], kv[1] + 1), output_type=type_info))
    caplog.set_level(logging.WARNING)
    # this process may hold endpoints of other tests' clusters: Thespian serves a client endpoint
    # only while that client asks something, so an idle one reads (and refuses) an attack later
    before = set(listening_ports({os.getpid()}))
    results = stream.execute_and_collect()  # submitted; the job waits at the gate
    try:
        wait_for(lambda: all((gate / f"running-{i}").exists() for i in range(2)), 60, "the job never ran")
        cluster_pids = {c.info()["admin_pid"]} | _descendants(c.info()["admin_pid"])
        cluster_ports = listening_ports(cluster_pids)
        client_ports = {a: p for a, p in listening_ports({os.getpid()}).items() if a not in before}
        # admin, logger, Dispatcher, ResourceManager, 2 TaskExecutors, JobMaster, 4 task actors,
        # and the tasks' data-plane servers; the client: its Thespian endpoint and collect server
        assert len(cluster_ports) >= 12, cluster_ports
        assert len(client_ports) >= 2, client_ports
        refused = {}
        for address in sorted(cluster_ports) + sorted(client_ports):
            owners = cluster_ports.get(address) or client_ports[address]
            for name, payload in attacks(canary).items():
                try:
                    refused[(address, name)] = send_and_expect_close(address, payload)
                except AssertionError as e:
                    raise AssertionError(f"{e} ({name}; held by {_describe(owners)})") from None
        assert not canary.exists()
    finally:
        (gate / "go").touch()
    assert sorted(results) == sorted((k, v * 10 + 1) for k, v in data)
    assert not canary.exists()

    # every refusal is logged with the attacker's address: the cluster's in its log file,
    # the client's through the client's logging
    log = Path(c.info()["log_file"])
    client_text = lambda: "\n".join(r.getMessage() for r in caplog.records)  # noqa: E731
    for (address, name), me in refused.items():
        where = client_text if address in client_ports else log.read_text
        owners = _describe(cluster_ports.get(address) or client_ports[address])
        wait_for(lambda: f"from {me} " in where(), 20,
                 f"no refusal of {name} sent to {address} (held by {owners}) from {me} was logged")
    c.wait_no_task_processes()


def test_a_member_without_the_secret_cannot_join(local_cluster, tmp_path):
    c = local_cluster(0, 1)
    wrong = tmp_path / "wrong.secret"
    wrong.write_text(os.urandom(32).hex())
    wrong.chmod(0o600)
    port = free_port()
    proc = c.cli("cluster", "join", "--leader", c.address, "--port", str(port), "-s", "1", check=False)
    assert proc.returncode == 1
    assert "rill cluster join needs the cluster's secret: --secret-file FILE" in proc.stderr
    proc = c.cli("cluster", "join", "--leader", c.address, "--port", str(port), "-s", "1",
                 "--secret-file", str(wrong), check=False, timeout=180)
    assert proc.returncode == 1, proc.stdout
    assert (f"The process at cluster://127.0.0.1:{c.port} did not answer as a Rill cluster: it refused this "
            "process' secret") in proc.stderr
    assert "Traceback" not in proc.stderr
    c.members.append(port)  # whatever it left is stopped and checked with the cluster
    out = c.cli("cluster", "status", "--port", str(c.port)).stdout
    assert "0 TaskExecutor(s)" in out
    assert "refused a message from 127.0.0.1:" in Path(c.info()["log_file"]).read_text()


def test_a_secret_file_readable_by_others_is_refused(local_cluster, tmp_path):
    c = local_cluster(0, 1)
    assert stat.S_IMODE(c.secret_file.stat().st_mode) == 0o600
    shared = tmp_path / "shared.json"
    shared.write_text(c.secret_file.read_text())
    shared.chmod(0o644)
    proc = c.cli("cluster", "join", "--leader", c.address, "--port", str(free_port()), "-s", "1",
                 "--secret-file", str(shared), check=False)
    assert proc.returncode == 1
    assert f"The cluster secret file {shared} has mode 644: it must not be readable by group or others" \
        in proc.stderr


def test_binding_beyond_loopback_warns_what_is_exposed(tmp_path):
    port = free_port()
    env = {**os.environ, "RILL_RUN_DIR": str(tmp_path)}
    try:
        proc = subprocess.run([RILL, "cluster", "start", "--host", "0.0.0.0", "--port", str(port), "-n", "0"],
                              env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert ("rill: WARNING: binding to 0.0.0.0, not loopback: from every host that can reach 0.0.0.0, "
                f"anyone can connect to this cluster's actor system port ({port})") in proc.stderr
        assert "the tasks' data-plane ports and the collect ports of clients" in proc.stderr
    finally:
        subprocess.run([RILL, "cluster", "stop", "--port", str(port), "--host", "127.0.0.1"], env=env,
                       capture_output=True, timeout=120)
    proc = subprocess.run([RILL, "cluster", "status", "--port", str(port)], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1


def test_a_job_graph_above_the_message_size_limit_fails_at_submission_naming_the_key(cluster, tmp_path):
    job = tmp_path / "big_job.py"
    job.write_text(
        "from rill.datastream import StreamExecutionEnvironment\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "env.from_collection([str(i) * 300 for i in range(1000)]).map(len).print()\n"
        "env.execute('big')\n")
    env = dict(cluster.env)
    cluster.env["RILL_CLUSTER_RPC_MAX_MESSAGE_SIZE"] = "64kb"
    try:
        proc = cluster.cli("run", "--target", cluster.address, str(job), check=False)
    finally:
        cluster.env.clear()
        cluster.env.update(env)
    assert proc.returncode != 0
    assert "more than cluster.rpc.max-message-size (65536 bytes); raise it on every host of the cluster and on " \
           "the client" in proc.stderr
    assert "SubmitJob" in proc.stderr
    assert "FINISHED" not in proc.stderr
