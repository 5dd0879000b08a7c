"""scorer.bench.workloads (the workloads file, strictly) and scorer.bench.clusters (each shape as API objects)."""

from __future__ import annotations

import collections
from pathlib import Path

import attrs
import pytest

from scorer.bench.clusters import CPU_METRIC, HOSTNAME, NETWORK_METRIC, ZONE, build_setup
from scorer.bench.workloads import (
    DEFAULT_FILE,
    SHAPES,
    Workload,
    load_workloads,
    scheduler_name,
    workload_from_data,
)
from scorer.errors import ConfigError
from scorer.model import Pod, namespace_from_dict, node_from_dict, object_from_dict, pod_from_dict

HEADER = "apiVersion: scorer.dev/v1alpha1\nkind: BenchWorkloads\n"


def write(tmp_path: Path, body: str, name: str = "w.yaml") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def errors_of(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_workloads(path)
    return str(caught.value).splitlines()


# -- the default file ------------------------------------------------------------------------


def test_the_default_file_holds_the_scheduler_perf_shapes_and_the_capacity_points() -> None:
    workloads = {w.name: w for w in load_workloads(None)}
    assert list(workloads) == ["plain", "metrics", "extender", "node-affinity", "anti-affinity",
                               "preferred-affinity", "pod-affinity", "topology-spreading", "default-spreading",
                               "preemption", "volumes", "volumes-wait", "dense"]
    assert workloads["plain"].percentages == [0, 100] and workloads["metrics"].percentages == [0, 100]
    assert all(w.percentages == [0] for name, w in workloads.items() if name not in ("plain", "metrics"))
    assert workloads["metrics"].profile == "metrics" and workloads["plain"].profile == "default"
    assert {name for name, w in workloads.items() if w.e2e} == {"plain", "anti-affinity", "topology-spreading",
                                                                "volumes", "volumes-wait"}
    assert workloads["volumes"].shape == "volumes" and workloads["volumes-wait"].shape == "volumes-wait"
    # the dense point: 10 existing pods per node, 15,000 nodes = 150,000 pods (the RSS target)
    assert workloads["dense"].init_pods.number(15000) == 150_000 and 15000 in workloads["dense"].sweep([1])
    assert workloads["preemption"].measured_pods(1000) == 500 and workloads["plain"].measured_pods(1000) == 1000
    assert workloads["plain"].sweep([100, 500]) == [100, 500]  # no cap: the command's sweep
    # the repository's bench/workloads.yaml is the same file (a symlink)
    assert (Path(__file__).resolve().parent.parent / "bench" / "workloads.yaml").resolve() == DEFAULT_FILE.resolve()


def test_a_minimal_workload_gets_the_scheduler_perf_templates(tmp_path: Path) -> None:
    [w] = load_workloads(write(tmp_path, HEADER + "workloads:\n- {name: mine, shape: plain}\n"))
    assert (w.node.cpu, w.node.memory, w.node.pods, w.node.zones) == ("4", "32Gi", 110, ["zone-a", "zone-b", "zone-c"])
    assert (w.pods.cpu, w.pods.memory, w.init_pods.per_node) == ("100m", "500Mi", 0.2)
    assert (w.profile, w.percentages, w.e2e, w.nodes) == ("default", [0], False, None)
    assert workload_from_data(w.as_dict()) == w  # the form a point's process receives


def test_a_profile_file_is_relative_to_the_workloads_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                            "profiles:\n- schedulerName: my-scheduler\n", "sched.yaml")
    body = HEADER + "workloads:\n- {name: a, shape: plain, profile: sched.yaml}\n"
    [w] = load_workloads(write(tmp_path / "sub", body))
    assert w.profile == str(tmp_path / "sub" / "sched.yaml") and w.config_file() == w.profile
    assert scheduler_name(w) == "my-scheduler"
    assert scheduler_name(attrs.evolve(w, profile="metrics")) == "default-scheduler"


# -- every error names the file and the field ------------------------------------------------


@pytest.mark.parametrize(("body", "expected"), [
    ("workloads:\n- {name: a, shape: plian}\n", 'workloads[0].shape: Unsupported value: "plian"'),
    ("workloads:\n- {name: a, shape: plain, nodez: [1]}\n", "workloads[0].nodez: unknown field"),
    ("workloads:\n- {name: a, shape: plain, percentages: [0, 101]}\n",
     "workloads[0].percentages[1]: must be in 0..100, got 101"),
    ("workloads:\n- {name: a, shape: plain, percentages: []}\n", "workloads[0].percentages: must list at least one"),
    ("workloads:\n- {name: a, shape: plain, nodes: [0]}\n", "workloads[0].nodes[0]: must be in 1..1,000,000, got 0"),
    ("workloads:\n- {name: a, shape: plain, node: {cpu: abc}}\n", "workloads[0].node.cpu:"),
    ("workloads:\n- {name: a, shape: plain, node: {pods: '3'}}\n",
     'workloads[0].node.pods: expected an integer, got string "3"'),
    ("workloads:\n- {name: a, shape: plain, node: {zones: []}}\n", "workloads[0].node.zones: must name at least one"),
    ("workloads:\n- {name: a, shape: plain, pods: {memory: 0}}\n", "workloads[0].pods.memory:"),
    ("workloads:\n- {name: a, shape: plain, pods: {count: 0}}\n", "workloads[0].pods.count: must be at least 1"),
    ("workloads:\n- {name: a, shape: plain, initPods: {perNode: -1}}\n",
     "workloads[0].initPods.perNode: must be at least 0, got -1.0"),
    ("workloads:\n- {name: a, shape: plain, e2e: 'yes'}\n", "workloads[0].e2e: expected a boolean"),
    ("workloads:\n- {name: 'a b', shape: plain}\n", "workloads[0].name: expected letters, digits"),
    ("workloads:\n- {shape: plain}\n", "workloads[0].name: Required value"),
    ("workloads:\n- {name: a, shape: plain}\n- {name: a, shape: plain}\n",
     'workloads[1].name: "a" is also workloads[0]'),
    ("workloads: []\n", "workloads: must list at least one workload"),
    ("", "workloads: Required value"),
])
def test_bad_workloads_are_refused_naming_the_file_and_the_field(tmp_path: Path, body: str, expected: str) -> None:
    path = write(tmp_path, HEADER + body)
    lines = errors_of(path)
    assert any(line.startswith(f"{path}: ") and expected in line for line in lines), lines


def test_the_header_and_the_document_are_checked(tmp_path: Path) -> None:
    lines = errors_of(write(tmp_path, "kind: Other\nworkloads: [{name: a, shape: plain}]\n"))
    assert any('kind: expected BenchWorkloads, got "Other"' in line for line in lines)
    assert any("apiVersion: expected scorer.dev/v1alpha1, got null" in line for line in lines)
    assert "duplicate field" in errors_of(write(tmp_path, HEADER + "workloads: []\nworkloads: []\n"))[0]
    assert "expected a BenchWorkloads object" in errors_of(write(tmp_path, "- 1\n"))[0]
    assert errors_of(tmp_path / "missing.yaml") == [f"{tmp_path / 'missing.yaml'}: no such file"]


# -- clusters ----------------------------------------------------------------------------------


def workload(shape: str, **kw: object) -> Workload:
    return workload_from_data({"name": "w", "shape": shape, **kw})


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_builds_objects_that_scorer_model_decodes(shape: str) -> None:
    setup = build_setup(workload(shape, initPods={"perNode": 2}), 12, 7)
    nodes = [node_from_dict(n) for n in setup.nodes]
    init = [pod_from_dict(p) for p in setup.init]
    measured = [pod_from_dict(p) for p in setup.measured]
    namespaces = {namespace_from_dict(ns).name for ns in setup.namespaces}
    for obj in setup.workloads:
        object_from_dict(obj)
    assert len(nodes) == 12 and len({n.name for n in nodes}) == 12
    assert all(n.labels[HOSTNAME] == n.name and n.allocatable["cpu"] == 4000 for n in nodes)
    assert all(p.node_name in {n.name for n in nodes} for p in init)
    assert len(measured) == 7 and not any(p.node_name for p in measured)
    assert {p.namespace for p in init + measured} <= namespaces  # creatable through an API server as they are
    assert all(p.scheduler_name == "default-scheduler" for p in init + measured)
    assert setup.metrics is None  # the default profile reads no metrics
    # init pods: perNode x nodes, except the anti-affinity group (one per node at most)
    assert len(init) == (12 if shape == "pod-anti-affinity" else 24)


def test_the_shapes_carry_what_scheduler_perf_gives_them() -> None:
    def first(shape: str, **kw: object) -> Pod:
        return pod_from_dict(build_setup(workload(shape, **kw), 6, 3).measured[0])

    assert first("node-affinity").affinity.node_affinity is not None  # type: ignore[union-attr]
    assert first("pod-anti-affinity").labels == {"color": "green", "name": "test"}
    assert first("topology-spread").labels == {"color": "blue"}
    spreading = build_setup(workload("default-spreading"), 6, 3)
    assert [w["kind"] for w in spreading.workloads] == ["ReplicaSet", "Service"]
    assert pod_from_dict(spreading.measured[0]).owner_references[0].kind == "ReplicaSet"
    preemption = build_setup(workload("preemption", initPods={"perNode": 4, "cpu": "900m", "priority": 1},
                                      pods={"cpu": "3", "priority": 10}), 3, 2)
    per_node = collections.Counter(p["spec"]["nodeName"] for p in preemption.init)
    assert list(per_node.values()) == [4, 4, 4]  # four low-priority pods fill each node
    assert {p["spec"]["priority"] for p in preemption.init} == {1}
    assert pod_from_dict(preemption.measured[0]).priority == 10


def test_zones_labels_and_the_metrics_snapshot() -> None:
    w = workload("plain", profile="metrics", node={"zones": ["z1", "z2"], "labels": {"pool": "a"}, "cpu": "8"})
    setup = build_setup(w, 5, 1, seed=3)
    assert [n["metadata"]["labels"][ZONE] for n in setup.nodes] == ["z1", "z2", "z1", "z2", "z1"]
    assert all(n["metadata"]["labels"]["pool"] == "a" for n in setup.nodes)
    assert setup.metrics is not None and set(setup.metrics.metrics) == {CPU_METRIC, NETWORK_METRIC}
    cpu = setup.metrics.metrics[CPU_METRIC]
    assert set(cpu) == {n["metadata"]["name"] for n in setup.nodes} and all(0.05 <= v <= 0.95 for v, _ in cpu.values())
    assert build_setup(w, 5, 1, seed=3).metrics == setup.metrics  # the seed decides


def test_pods_carry_the_schedulername_of_the_profile_file(tmp_path: Path) -> None:
    config = write(tmp_path, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                             "profiles:\n- schedulerName: mine\n", "c.yaml")
    setup = build_setup(workload("plain", profile=str(config)), 3, 2)
    assert {p["spec"]["schedulerName"] for p in setup.init + setup.measured} == {"mine"}
