"""Each contrib plugin installs with pip into a fresh environment, is listed by
``scorer plugins`` through its entry point, and its own tests pass there
(run from a copy, so they import the installed package, not the source tree)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONTRIB = REPO / "contrib_plugins"

PLUGINS = [
    ("networktraffic", "NetworkTraffic", "scorer-networktraffic", ["filter", "score"]),
    ("networkaware", "NetworkAware", "scorer-networkaware", ["preFilter", "filter", "preScore", "score"]),
    ("loadaware", "LoadAware", "scorer-loadaware", None),
]


@pytest.mark.slow
@pytest.mark.parametrize(("directory", "plugin", "distribution", "points"), PLUGINS)
def test_contrib_plugin_in_fresh_venv(tmp_path, directory, plugin, distribution, points):
    source = CONTRIB / directory
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "SCORER_DISABLE_PLUGIN_AUTOLOAD", "VIRTUAL_ENV")}
    # scorer from this checkout, then the plugin exactly as its README says: pip install contrib_plugins/<name>
    for args in ([str(REPO)], [f"{source}[test]"]):
        install = subprocess.run([py, "-m", "pip", "install", "--quiet", *args], capture_output=True, text=True,
                                 env=env, timeout=900, cwd=tmp_path)
        assert install.returncode == 0, install.stderr[-3000:]

    listed = subprocess.run([str(venv / "bin" / "scorer"), "plugins", "--output", "json"], capture_output=True,
                            text=True, env=env, cwd=tmp_path, timeout=120)
    assert listed.returncode == 0, listed.stderr
    plugins = {p["name"]: p for p in json.loads(listed.stdout)["plugins"]}
    assert plugins[plugin]["distribution"] == distribution
    assert plugins[plugin]["version"] == "0.1.0"
    if points is not None:
        assert plugins[plugin]["extensionPoints"] == points

    copy = tmp_path / directory  # README and tests; the package itself is imported from the venv
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("*.egg-info", "build", "__pycache__", ".*"))
    shutil.rmtree(copy / f"scorer_{directory}")
    run = subprocess.run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(copy),
                          str(copy / "tests")],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "skipped" not in run.stdout.split("\n")[-2], run.stdout[-500:]
