"""A third-party plugin distribution, pip-installed with scorer into a fresh
virtual environment, is discovered through its entry point and scores pods;
a broken one installed beside it is reported and skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

PLUGIN = textwrap.dedent('''
    import attrs
    from scorer.plugin import hookimpl

    SCORER_PLUGIN_API = "1.0"
    NAME = "PreferLabel"

    @attrs.frozen
    class PreferLabelArgs:
        label: str = "fast"

    class PreferLabel:
        name = NAME

        def __init__(self, args):
            self.label = args.label

        def score(self, state, pod, node):
            return 100 if self.label in node.node.labels else 0

    @hookimpl
    def scorer_register_plugins(registry):
        registry.register(NAME, lambda args, handle: PreferLabel(args or PreferLabelArgs()),
                          args_type=PreferLabelArgs, plugin_type=PreferLabel)
''')

PYPROJECT = textwrap.dedent('''
    [build-system]
    requires = ["setuptools>=64"]
    build-backend = "setuptools.build_meta"

    [project]
    name = "scorer-prefer-label"
    version = "0.3.1"
    dependencies = ["scorer"]

    [project.entry-points.scorer]
    prefer_label = "prefer_label"

    [tool.setuptools]
    py-modules = ["prefer_label"]
''')

# A second distribution with an author's mistake (its plugin class is not given): scorer runs without it.
BROKEN_PLUGIN = PLUGIN.replace("PreferLabel", "Broken").replace(", plugin_type=Broken", "")
BROKEN_PYPROJECT = (PYPROJECT.replace("scorer-prefer-label", "scorer-broken").replace("prefer_label", "broken")
                    .replace("0.3.1", "0.0.1"))

CONFIG = textwrap.dedent('''
    apiVersion: kubescheduler.config.k8s.io/v1
    kind: KubeSchedulerConfiguration
    profiles:
    - schedulerName: default-scheduler
      plugins:
        multiPoint:
          enabled:
          - name: PreferLabel
            weight: 10
      pluginConfig:
      - name: PreferLabel
        args: {label: ssd}
''')

CLUSTER = textwrap.dedent('''
    kind: List
    items:
    - {kind: Node, metadata: {name: plain}, status: {allocatable: {cpu: "8", memory: 16Gi, pods: "20"}}}
    - kind: Node
      metadata: {name: fast, labels: {ssd: "yes"}}
      status: {allocatable: {cpu: "8", memory: 16Gi, pods: "20"}}
    - {kind: Pod, metadata: {name: a}, spec: {containers: [{name: c, resources: {requests: {cpu: 100m}}}]}}
    - {kind: Pod, metadata: {name: b}, spec: {containers: [{name: c, resources: {requests: {cpu: 100m}}}]}}
''')


@pytest.mark.slow
def test_throwaway_distribution_in_fresh_venv(tmp_path):
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "pyproject.toml").write_text(PYPROJECT)
    (dist / "prefer_label.py").write_text(PLUGIN)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "pyproject.toml").write_text(BROKEN_PYPROJECT)
    (broken / "broken.py").write_text(BROKEN_PLUGIN)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SCORER_DISABLE_PLUGIN_AUTOLOAD")}
    install = subprocess.run([str(py), "-m", "pip", "install", "--quiet", str(REPO), str(dist), str(broken)],
                             capture_output=True, text=True, env=env, timeout=900)
    assert install.returncode == 0, install.stderr[-3000:]
    scorer = str(venv / "bin" / "scorer")

    listed = subprocess.run([scorer, "plugins", "--output", "json"], capture_output=True, text=True, env=env,
                            cwd=tmp_path, timeout=120)
    assert listed.returncode == 0, listed.stderr
    listed_json = json.loads(listed.stdout)
    plugins = {p["name"]: p for p in listed_json["plugins"]}
    assert plugins["PreferLabel"]["distribution"] == "scorer-prefer-label"
    assert plugins["PreferLabel"]["version"] == "0.3.1"
    assert plugins["PreferLabel"]["extensionPoints"] == ["score"]
    assert "Broken" not in plugins
    assert listed_json["failedDistributions"] == [
        {"distribution": "scorer-broken", "version": "0.0.1", "entryPoint": "broken", "plugins": ["Broken"],
         "error": "plugin 'Broken' implements no extension point: pass plugin_type=<the plugin's class> to "
                  "registry.register(), or register the class itself as the factory"}]
    assert listed.stderr == ("warning: scorer-broken 0.0.1 (entry point broken) failed to load: plugin 'Broken' "
                             "implements no extension point: pass plugin_type=<the plugin's class> to "
                             "registry.register(), or register the class itself as the factory; scorer runs without "
                             "its plugins (--block-plugin broken stops loading it)\n")
    table = subprocess.run([scorer, "plugins"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert table.returncode == 0
    assert "scorer-broken  0.0.1    --block-plugin broken  Broken   plugin 'Broken' implements" in table.stdout

    (tmp_path / "config.yaml").write_text(CONFIG)
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    sim = subprocess.run([scorer, "simulate", "--config", "config.yaml", "--cluster", "cluster.yaml",
                          "--output", "json"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert sim.returncode == 0, sim.stderr
    placements = json.loads(sim.stdout)["placements"]
    assert [p["node"] for p in placements] == ["fast", "fast"]
    assert all("PreferLabel +1000" in p["decidedBy"] for p in placements)
