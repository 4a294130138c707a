"""PrintSinkOperator: whole lines even when several subtasks print at once."""

import re
import subprocess
import sys
import textwrap


# Embedded only: the bug was threads of one process sharing sys.stdout (cluster tasks are
# processes, their lines go to the cluster's .out file: tests/conftest.py's ``printed``).
def test_regression_parallel_print_subtasks_never_interleave_within_a_line(tmp_path):
    """Two print subtasks writing to the same piped stdout used to interleave mid-line
    (``('pyfl1> ('int', 795)``): TextIOWrapper.write is not atomic across threads."""
    program = textwrap.dedent("""
        from rill.datastream import StreamExecutionEnvironment
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(8)
        env.from_sequence(0, 799_999).map(lambda x: ("word-%d" % x, x)).print()
        env.execute("print")
    """)
    job = tmp_path / "job.py"
    job.write_text(program)
    proc = subprocess.run([sys.executable, str(job)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    pattern = re.compile(r"^[1-8]> \('word-(\d+)', (\d+)\)$")
    bad = [line for line in lines if not pattern.match(line)]
    assert bad == []
    assert sorted(int(pattern.match(line).group(2)) for line in lines) == list(range(800_000))
