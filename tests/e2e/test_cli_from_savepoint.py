"""``rill run --from-savepoint PATH [--allow-non-restored-state]`` (Flink's ``flink run -s PATH
-n``): the settings reach the job's configuration as ``execution.state-recovery.*``, and the
JobMaster restores from the path (here one without a snapshot: a clear error; restoring a real
one is tests/engine/runtime/checkpoint/test_restart_from_checkpoint.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from rill.common.configuration import Configuration
from rill.graph.savepoint_restore_settings import SavepointRestoreSettings

RILL = str(Path(sys.executable).parent / "rill")

JOB = """
    from rill.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    conf = env.get_configuration()
    print("settings:", conf.get_string("execution.state-recovery.path"),
          conf.get_string("execution.state-recovery.ignore-unclaimed-state"), flush=True)
    env.from_collection([1, 2, 3]).key_by(lambda x: x).map(lambda x: x).uid("m").print()
    env.execute("restored")
"""


def rill(tmp_path, *args):
    (tmp_path / "job.py").write_text(textwrap.dedent(JOB))
    return subprocess.run([RILL, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_from_savepoint_sets_the_state_recovery_keys_and_the_job_restores_from_the_path(tmp_path):
    proc = rill(tmp_path, "run", "--no-progress", "--from-savepoint", "sp-1", "--allow-non-restored-state", "job.py")
    assert f"settings: {tmp_path / 'sp-1'} true" in proc.stdout
    assert proc.returncode == 1
    assert f"failed during deployment: No completed checkpoint or savepoint at '{tmp_path / 'sp-1'}'" in proc.stderr


def test_allow_non_restored_state_needs_a_savepoint(tmp_path):
    proc = rill(tmp_path, "run", "-n", "job.py")
    assert proc.returncode == 2
    assert "--allow-non-restored-state needs --from-savepoint PATH" in proc.stderr


def test_settings_read_flink_2_keys_and_their_flink_1_names():
    conf = Configuration().set_string("execution.savepoint.path", "/sp").set_string(
        "execution.savepoint.ignore-unclaimed-state", "true")
    assert SavepointRestoreSettings.from_configuration(conf) == SavepointRestoreSettings.for_path("/sp", True)
    assert SavepointRestoreSettings.from_configuration(Configuration()) == SavepointRestoreSettings.none()
    back = SavepointRestoreSettings.for_path("s3://b/sp").to_configuration(Configuration())
    assert back.to_dict() == {"execution.state-recovery.path": "s3://b/sp",
                              "execution.state-recovery.ignore-unclaimed-state": "false"}
