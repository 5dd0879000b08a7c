"""Every code block of docs/writing-a-plugin.md runs as written.

Each fenced block follows a marker, ``<!-- guide: WHAT -->``, that says how it runs:
``module NAME`` (executed as the module NAME, which later blocks import), ``test`` (executed, then
each ``test_*`` function it defines is called), ``python`` (executed), ``config`` (a
KubeSchedulerConfiguration, validated with the guide's modules and simulated on the demo cluster,
where it must change placements), ``generated PATH`` (exactly the file ``scorer plugin new`` writes
there), ``sh`` (run line by line in a fresh virtual environment: slow). The table after
``<!-- guide: demo-nodes -->`` must say what scorer/data/demo-cluster.yaml holds.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from scorer.scaffold import new_plugin
from scorer.simulate import load_demo_cluster
from scorer.testing import build_registry, load_config, simulate

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "writing-a-plugin.md"
TEXT = GUIDE.read_text(encoding="utf-8")
BLOCK = re.compile(r"<!-- guide: (?P<what>[^>]*?) -->\n```(?P<lang>\S*)\n(?P<code>.*?)^```$", re.S | re.M)
BLOCKS = [(m["what"], m["lang"], m["code"]) for m in BLOCK.finditer(TEXT)]


def blocks(kind: str) -> list[tuple[str, str]]:
    """(the rest of the marker, the code) of the blocks whose marker starts with ``kind``."""
    return [(what.removeprefix(kind).strip(), code) for what, _, code in BLOCKS if what.split()[0] == kind]


def test_every_block_has_a_marker_that_runs_it():
    fences = re.findall(r"^```\S+$", TEXT, re.M)  # opening fences (a closing one has no language)
    assert len(fences) == len(BLOCKS)
    assert {what.split()[0] for what, _, _ in BLOCKS} == {"sh", "generated", "module", "config", "test", "python"}


@pytest.fixture
def guide_modules(monkeypatch):
    """The guide's ``module`` blocks, as modules that later blocks import."""
    modules = []
    for name, code in blocks("module"):
        module = types.ModuleType(name)
        exec(compile(code, f"{GUIDE}:{name}", "exec"), module.__dict__)
        monkeypatch.setitem(sys.modules, name, module)
        modules.append(module)
    return modules


def test_the_modules_register_their_plugins(guide_modules):
    registry = build_registry(autoload=False, modules=guide_modules)
    assert not registry.failures
    assert {"GuideFastNetwork", "GuideAvoidZone", "GuideIdleCpu"} <= set(registry.plugins)
    assert all(module.SCORER_PLUGIN_API == "1.0" for module in guide_modules)


def test_the_test_blocks_pass(guide_modules):
    [(_, code)] = blocks("test")
    scope: dict[str, object] = {}
    exec(compile(code, f"{GUIDE}:test", "exec"), scope)
    tests = [test for name, test in scope.items() if name.startswith("test_") and callable(test)]
    assert len(tests) == 4
    for test in tests:
        test()


def test_the_config_validates_and_changes_placements_on_the_demo_cluster(guide_modules):
    [(_, code)] = blocks("config")
    registry = build_registry(autoload=False, modules=guide_modules)
    config = yaml.safe_load(code)
    load_config(config, registry.catalog())
    default = simulate(load_demo_cluster(), None, registry=registry)
    guided = simulate(load_demo_cluster(), config, registry=registry)
    assert guided.errors == 0 and not guided.warnings
    placed = {p.pod: p for p in guided.placements}
    assert {pod for pod, p in placed.items() if p.node == "node-b1"} > {"shop/web-0", "shop/web-1", "shop/api-0"}
    assert placed["batch/train-0"].node is None
    assert "1 node(s) in zone zone-a" in placed["batch/train-0"].message
    assert not {p.node for p in guided.placements} & {"node-a1", "node-a2", "gpu-1"}
    assert [p.node for p in default.placements] != [p.node for p in guided.placements]

    # GuideFastNetwork alone: web-0, web-1, api-0 and sidecar-free go from node-a2 to node-b1.
    profile = config["profiles"][0]
    profile["plugins"]["multiPoint"]["enabled"] = profile["plugins"]["multiPoint"]["enabled"][:1]
    profile["pluginConfig"] = profile["pluginConfig"][:1]
    alone = simulate(load_demo_cluster(), config, registry=registry)
    moved = {a.pod: (a.node, b.node) for a, b in zip(default.placements, alone.placements, strict=True)
             if a.node != b.node}
    assert moved == {pod: ("node-a2", "node-b1") for pod in ("shop/web-0", "shop/web-1", "shop/api-0",
                                                              "shop/sidecar-free")}
    assert all("GuideFastNetwork +200" in p.decided_by for p in alone.placements if p.pod in moved)


def test_the_python_blocks_run():
    found = blocks("python")
    assert found
    for _, code in found:
        exec(compile(code, f"{GUIDE}:python", "exec"), {})


def test_the_generated_files_are_what_scorer_plugin_new_writes(tmp_path):
    found = blocks("generated")
    assert found
    for path, code in found:
        name = path.split("/")[0]
        if not (tmp_path / name).exists():
            new_plugin(name, "score", tmp_path)
        assert (tmp_path / path).read_text(encoding="utf-8") == code


def test_the_demo_nodes_table_is_the_demo_cluster():
    table = TEXT.split("<!-- guide: demo-nodes -->\n", 1)[1].split("\n\n", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    cluster = load_demo_cluster()
    snapshot = yaml.safe_load_all(REPO.joinpath("scorer/data/demo-cluster.yaml").read_text(encoding="utf-8"))
    [metrics] = [doc["metrics"] for doc in snapshot if doc.get("kind") == "MetricsSnapshot"]
    assert [row[0] for row in rows] == [node.name for node in cluster.nodes]
    for row, node in zip(rows, cluster.nodes, strict=True):
        labels = {k: v for k, v in node.labels.items() if k not in ("kubernetes.io/hostname", "kubernetes.io/os")}
        assert row[1] == ", ".join(f"`{k}={v}`" for k, v in sorted(labels.items(), key=lambda kv: kv[0] != ZONE))
        assert node.labels["kubernetes.io/hostname"] == node.name and node.labels["kubernetes.io/os"] == "linux"
        taints = ", ".join(f"`{t.key}={t.value}:{t.effect}`" for t in node.taints
                           if t.key != "node.kubernetes.io/unschedulable")
        assert row[3] == ("cordoned" if node.unschedulable else taints)
        assert row[4] == str(metrics["cpu_utilization"].get(node.name, "(none)"))


ZONE = "topology.kubernetes.io/zone"


@pytest.mark.slow
def test_the_shell_blocks_run_in_a_fresh_environment(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SCORER_DISABLE_PLUGIN_AUTOLOAD")}
    env |= {"VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}
    install = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", str(REPO)], capture_output=True,
                             text=True, env=env, cwd=tmp_path, timeout=900)
    assert install.returncode == 0, install.stderr[-3000:]
    found = blocks("sh")
    assert found
    for _, code in found:
        for line in code.splitlines():
            done = subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=env, cwd=tmp_path,
                                  timeout=900)
            assert done.returncode == 0, f"{line}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
            if line.startswith("scorer plugins"):
                assert re.search(r"^GuideHighSpeed +scorer-guide-high-speed +0\.1\.0 +score$", done.stdout, re.M)
            if line.startswith("scorer simulate"):
                assert "GuideHighSpeed +200" in done.stdout
