"""``scorer bench --cluster`` on what ``kubectl get ... -o yaml`` writes of a real API server.

The objects are created in a fresh kube-apiserver v1.20.2 (a workload's nodes, bound and pending
pods, a ReplicaSet and a Service, a PodDisruptionBudget, a Secret and a ConfigMap), exported with
the command the issue names (``kubectl get nodes,pods,namespaces,replicasets,services,
poddisruptionbudgets -A -o yaml``, plus the Secrets and ConfigMaps a user's export may hold), and
benched at ``--scale 2``: a ``kind: List`` of full API objects, managedFields (kubectl >= 1.21 writes
them with ``--show-managed-fields``, as older ones always did) and status included.
With kubectl installed the export is kubectl's own; without it, the test writes it as kubectl does
(one LIST per resource, each item given its kind and apiVersion, all in one ``kind: List``), so it
runs everywhere the API server does.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from pathlib import Path

import orjson
import pytest
import yaml
from kubekit import ControlPlane

from scorer.bench import e2e
from scorer.bench.clusters import build_setup
from scorer.bench.workloads import workload_from_data
from scorer.cli import main

pytestmark = pytest.mark.kube

EXPORT = "nodes,pods,namespaces,replicasets,services,poddisruptionbudgets,secrets,configmaps"


# What kubectl LISTs for EXPORT on a v1.20 server: (path, apiVersion, kind) per resource.
RESOURCES = (("/api/v1/nodes", "v1", "Node"), ("/api/v1/pods", "v1", "Pod"),
             ("/api/v1/namespaces", "v1", "Namespace"), ("/apis/apps/v1/replicasets", "apps/v1", "ReplicaSet"),
             ("/api/v1/services", "v1", "Service"),
             ("/apis/policy/v1beta1/poddisruptionbudgets", "policy/v1beta1", "PodDisruptionBudget"),
             ("/api/v1/secrets", "v1", "Secret"), ("/api/v1/configmaps", "v1", "ConfigMap"))


def export(plane: ControlPlane) -> bytes:
    """``kubectl get EXPORT -A -o yaml --show-managed-fields``: kubectl's when installed, else the same List."""
    binary = shutil.which("kubectl")
    if binary is not None:
        done = subprocess.run([binary, "--kubeconfig", str(plane.kubeconfig), "get", EXPORT, "-A", "-o", "yaml",
                               "--show-managed-fields"], capture_output=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        return done.stdout
    items = []
    for path, api_version, kind in RESOURCES:
        status, body = plane.request("GET", path)
        assert status == 200, body
        items += [{"apiVersion": api_version, "kind": kind, **item} for item in orjson.loads(body)["items"]]
    listed = {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}
    return yaml.safe_dump(listed, default_flow_style=False).encode()


async def create(plane: ControlPlane, objects: e2e.Objects, extra: list[e2e.Request]) -> None:
    api = e2e.Api(plane.url)
    try:
        deadline = time.monotonic() + 120
        await e2e.load(api, objects, deadline)
        await api.create_all(extra, deadline)
    finally:
        await api.close()


def test_a_kubectl_export_of_a_real_cluster_is_benched_scaled(tmp_path: Path, capsys) -> None:
    workload = workload_from_data({"name": "web", "shape": "default-spreading", "initPods": {"perNode": 1}})
    setup = build_setup(workload, nodes=6, pods=4)
    budget = {"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
              "metadata": {"name": "web", "namespace": setup.measured[0]["metadata"]["namespace"]},
              "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token", "namespace": "default"},
              "stringData": {"password": "not-exported-by-scorer"}}
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "default"},
                  "data": {"a": "b"}}
    with ControlPlane(tmp_path / "plane", audit=False) as plane:
        extra = [e2e.request_for(budget)]
        extra += [e2e.Request(f"/api/v1/namespaces/default/{plural}", obj)
                  for plural, obj in (("secrets", secret), ("configmaps", config_map))]
        asyncio.run(create(plane, e2e.setup_objects(setup), extra))
        text = export(plane)
    path = tmp_path / "cluster.yaml"
    path.write_bytes(text)
    listed = yaml.safe_load(text)
    assert listed["kind"] == "List"
    assert any(item["metadata"].get("managedFields") for item in listed["items"])  # full objects, as kubectl writes
    assert any(item["kind"] == "Node" and item.get("status", {}).get("allocatable") for item in listed["items"])

    out = tmp_path / "out"
    assert main(["bench", "--cluster", str(path), "--scale", "2", "--pods", "8", "--out", str(out)]) == 0
    result = orjson.loads((out / "result.json").read_bytes())
    [point] = result["points"]
    assert point["error"] is None
    assert point["nodes"] == 12  # 6 nodes, twice
    assert point["init_pods"] == 12  # one running pod per node, twice
    assert point["pods"] == 8 and point["bound"] == 8
    assert point["ignored"]["Secret"] >= 1 and point["ignored"]["ConfigMap"] >= 1
    printed = capsys.readouterr()
    assert "Secret" in printed.out + printed.err  # the ignored kinds are named with their counts
