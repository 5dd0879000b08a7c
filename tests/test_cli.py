"""The scorer command as a user runs it: simulate, explain, config validate, plugins."""

from __future__ import annotations

import json
import textwrap

import pytest
import yaml

from scorer.cli import main


@pytest.fixture(autouse=True)
def _no_autoload(monkeypatch):
    monkeypatch.setenv("SCORER_DISABLE_PLUGIN_AUTOLOAD", "1")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


CLUSTER = textwrap.dedent("""
    apiVersion: v1
    kind: Node
    metadata: {name: small}
    status: {allocatable: {cpu: "1", memory: 2Gi, pods: "10"}}
    ---
    apiVersion: v1
    kind: Node
    metadata: {name: big}
    status: {allocatable: {cpu: "8", memory: 16Gi, pods: "10"}}
    ---
    apiVersion: v1
    kind: Node
    metadata: {name: tainted}
    spec: {taints: [{key: dedicated, value: x, effect: NoSchedule}]}
    status: {allocatable: {cpu: "8", memory: 16Gi, pods: "10"}}
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: web, namespace: shop}
    spec: {containers: [{name: c, image: nginx, resources: {requests: {cpu: 500m, memory: 1Gi}}}]}
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: huge, namespace: shop}
    spec: {containers: [{name: c, image: nginx, resources: {requests: {cpu: "16"}}}]}
""")


@pytest.fixture
def cluster_file(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    return str(path)


def test_simulate_demo_cluster(capsys):
    code, out, err = run(capsys, "simulate")
    assert code == 0
    assert "placed" in out and "pods/s" in out
    assert "0/7 nodes are available" in out  # the demo's pods that cannot fit say why
    assert "huge-0" in out


def test_simulate_json(capsys, cluster_file):
    code, out, _ = run(capsys, "simulate", "--cluster", cluster_file, "--output", "json")
    assert code == 0
    data = json.loads(out)
    by_pod = {p["pod"]: p for p in data["placements"]}
    assert by_pod["shop/web"]["node"] == "big"
    assert "NodeResourcesFit" in by_pod["shop/web"]["decidedBy"]
    assert by_pod["shop/huge"]["node"] is None
    assert by_pod["shop/huge"]["message"] == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu."
    )
    assert data["summary"]["placed"] == 1 and data["summary"]["unschedulable"] == 1


def test_explain_json_contract(capsys, cluster_file):
    code, out, _ = run(capsys, "explain", "--cluster", cluster_file, "--pod", "shop/web", "--output", "json")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"pod", "profile", "nodes", "selected", "message"}
    assert data["pod"] == "shop/web" and data["profile"] == "default-scheduler"
    assert data["selected"] == "big" and data["message"] == ""
    assert set(data["nodes"]) == {"small", "big", "tainted"}
    tainted = data["nodes"]["tainted"]
    assert tainted == {"feasible": False, "scores": {}, "total": 0, "metrics": {},
                       "filter": {"plugin": "TaintToleration", "code": "UnschedulableAndUnresolvable",
                                  "reasons": ["node(s) had untolerated taint(s)"]}}
    big = data["nodes"]["big"]
    assert big["feasible"] and big["filter"] is None
    fit = big["scores"]["NodeResourcesFit"]
    # LeastAllocated: cpu (8000-500)*100/8000 = 93, memory (16-1)*100/16 = 93 -> 93.
    assert fit == {"raw": 93, "normalized": 93, "weight": 1, "weighted": 93}
    assert big["scores"]["TaintToleration"] == {"raw": 0, "normalized": 100, "weight": 3, "weighted": 300}
    assert big["total"] == sum(s["weighted"] for s in big["scores"].values())


def test_explain_unschedulable_exits_zero_with_message(capsys, cluster_file):
    code, out, _ = run(capsys, "explain", "--cluster", cluster_file, "--pod", "shop/huge", "--output", "json")
    assert code == 0
    data = json.loads(out)
    assert data["selected"] is None
    assert data["message"] == "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu."
    small = data["nodes"]["small"]["filter"]
    assert small == {"plugin": "NodeResourcesFit", "code": "UnschedulableAndUnresolvable",
                     "reasons": ["Insufficient cpu"]}


def test_explain_table(capsys, cluster_file):
    code, out, _ = run(capsys, "explain", "--cluster", cluster_file, "--pod", "shop/web")
    assert code == 0
    assert "big*" in out and "selected: big" in out


@pytest.mark.parametrize(
    ("argv_tail", "needle"),
    [
        (["--pod", "shop/nope"], "pod 'shop/nope' is not in the cluster file"),
        (["--pod", "shop/web", "--config", "/no/such/file.yaml"], "/no/such/file.yaml"),
    ],
)
def test_explain_bad_input_exit_2_one_line(capsys, cluster_file, argv_tail, needle):
    code, out, err = run(capsys, "explain", "--cluster", cluster_file, *argv_tail, "--output", "json")
    assert code == 2
    assert out == ""
    assert needle in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_explain_bad_cluster_file(capsys, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("kind: Pod\nmetadata: {name: p}\n"
                    "spec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}\n")
    code, _, err = run(capsys, "explain", "--cluster", str(path), "--pod", "p", "--output", "json")
    assert code == 2
    assert "Pod default/p" in err and "spec.containers[0].resources.requests.cpu" in err


def test_config_validate_prints_effective_config(capsys, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent("""
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        profiles:
        - schedulerName: packer
          plugins:
            score:
              enabled: [{name: NodeResourcesFit, weight: 5}]
          pluginConfig:
          - name: NodeResourcesFit
            args: {scoringStrategy: {type: MostAllocated}}
    """))
    code, out, _ = run(capsys, "config", "validate", str(path))
    assert code == 0
    effective = yaml.safe_load(out.split("\n---\n")[0])
    assert effective["profiles"][0]["schedulerName"] == "packer"
    args = effective["profiles"][0]["pluginConfig"][0]["args"]
    assert args["scoringStrategy"]["type"] == "MostAllocated"
    assert args["scoringStrategy"]["resources"] == [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
    assert "NodeResourcesFit" in out.split("\n---\n")[1]


def test_config_validate_errors_name_the_field(capsys, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(textwrap.dedent("""
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        profiles:
        - schedulerName: x
          pluginConfig:
          - name: NodeResourcesFit
            args:
              scoringStrategy:
                type: LeastAllocated
                resources: [{name: cpu, weight: 500}]
          plugins:
            score:
              enabled: [{name: NoSuchPlugin}]
    """))
    code, _, err = run(capsys, "config", "validate", str(path))
    assert code != 0
    assert "profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].weight" in err
    assert "NoSuchPlugin" in err
    assert "Traceback" not in err


def test_plugins_lists_builtins(capsys):
    code, out, _ = run(capsys, "plugins", "--output", "json")
    assert code == 0
    data = {p["name"]: p for p in json.loads(out)}
    assert data["NodeResourcesFit"]["distribution"] == "scorer"
    assert data["NodeResourcesFit"]["extensionPoints"] == ["preFilter", "filter", "preScore", "score"]
    code, out, _ = run(capsys, "plugins")
    assert "TaintToleration" in out and "EXTENSION POINTS" in out
