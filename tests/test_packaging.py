"""The installed layout: every package folder under the mapped top-level folders is listed in
setup.cfg (a wheel would silently leave out a missing one), and the README's two commands are
the ones CI runs."""

import configparser
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAPPING = {"engine": "rill", "operators": "rill.operators", "state": "rill.state", "network": "rill.network"}


def _listed_packages():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return {p.strip() for p in cfg["options"]["packages"].split("\n") if p.strip()}


def test_every_package_folder_is_listed_in_setup_cfg():
    found = set()
    for folder, name in MAPPING.items():
        for root, dirs, files in os.walk(ROOT / folder):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            if "__init__.py" in files:
                rel = os.path.relpath(root, ROOT / folder)
                found.add(name if rel == "." else name + "." + rel.replace(os.sep, "."))
    assert found == _listed_packages()


def test_package_dir_maps_the_architecture_folders():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    lines = [line.split("=") for line in cfg["options"]["package_dir"].split("\n") if "=" in line]
    assert {k.strip(): v.strip() for k, v in lines} == {v: k for k, v in MAPPING.items()}


def _ci_command(script: str = "run") -> str:
    ci = (ROOT / ".ci" / script).read_text()
    return next(line for line in ci.splitlines() if line.startswith("python3 -m venv"))


def test_ci_runs_the_readme_test_command_and_the_coverage_script_the_readme_coverage_command():
    readme = (ROOT / "README.md").read_text()
    assert _ci_command() in readme and _ci_command("coverage") in readme
    assert _ci_command().endswith(".venv/bin/pytest -q -p no:cacheprovider -n 3 --dist loadgroup")


def test_the_coverage_command_measures_coverage_and_reports_it_against_the_floor():
    steps = [step.strip() for step in _ci_command("coverage").split("&&")]
    coverage = [step for step in steps if step.startswith(".venv/bin/coverage")]
    assert coverage[0] == ".venv/bin/coverage erase"  # no data of an earlier run is counted
    assert coverage[1].startswith(".venv/bin/coverage run -m pytest ")
    assert coverage[2:] == [".venv/bin/coverage combine -q", ".venv/bin/coverage report"]
    assert steps.index(coverage[0]) == len(steps) - 4  # coverage wraps the test run, nothing runs after it


def test_coverage_covers_every_process_and_fails_below_the_floor():
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(ROOT / "setup.cfg")
    run, report = cfg["coverage:run"], cfg["coverage:report"]
    # the cluster's processes: `rill` subprocesses and xdist workers (subprocess patch), Thespian's
    # multiprocessing children; not `_exit`, which saved every ancestor's Coverage again per fork
    assert {p.strip() for p in run["patch"].split(",")} == {"subprocess"}
    assert "multiprocessing" in run["concurrency"] and run.getboolean("parallel")
    assert run["data_file"].startswith("${PWD")  # absolute in processes with another working directory
    assert int(report["fail_under"]) >= 90
