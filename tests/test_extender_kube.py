"""Extender mode with a real kube-scheduler v1.20.2 against a real kube-apiserver.

kube-scheduler (v1beta1 configuration, an ``extenders`` block with
``nodeCacheCapable: true`` and ``ignorable: true``) keeps its own plugins and
binds; ``scorer run --extender-profile ... --no-scheduling --metrics FILE``
answers its filter and prioritize calls from a static metrics snapshot. The
pods go where scorer's metric-driven scores send them, kube-scheduler's own
filters still apply (a tainted node stays out), and with scorer stopped
kube-scheduler keeps scheduling on its own.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubekit import ControlPlane, free_port, kube_scheduler_binary
from servicekit import Cluster, ScorerProcess, node_manifest, pod_manifest, wait_until

from scorer.bench.controlplane import end_process

PROFILE = "scorer-extender"
SCORER_CONFIG = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {{leaderElect: false}}
profiles:
- schedulerName: {PROFILE}
  plugins:
    multiPoint:
      enabled: [{{name: PrioritySort}}, {{name: DefaultBinder}}, {{name: LoadAware, weight: 3}},
                {{name: NetworkTraffic, weight: 2}}]
      disabled: [{{name: "*"}}]
  pluginConfig:
  - name: LoadAware
    args: {{usageThresholds: {{cpu: 90}}}}
"""
# busy: above LoadAware's 90% threshold (scorer filters it out); idle: little CPU and traffic (scorer's best);
# half: half busy and ten times idle's traffic; tainted: the idlest of all, but kube-scheduler's TaintToleration
# keeps the pods off it.
SNAPSHOT = """\
apiVersion: scorer.dev/v1alpha1
kind: MetricsSnapshot
metrics:
  cpu_utilization: {busy: 0.95, idle: 0.10, half: 0.50, tainted: 0.01}
  network_receive_bytes_per_second: {busy: 1.0e+6, idle: 1.0e+5, half: 1.0e+6, tainted: 1.0e+3}
"""




def kube_scheduler_config(kubeconfig: Path, extender_port: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1beta1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 100, "burst": 200},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": "default-scheduler"}],
        "extenders": [{"urlPrefix": f"http://127.0.0.1:{extender_port}/scheduler", "filterVerb": "filter",
                       "prioritizeVerb": "prioritize", "weight": 5, "nodeCacheCapable": True, "ignorable": True,
                       "httpTimeout": "5s", "enableHTTPS": False}],
    }


def bound_to(cluster: Cluster, name: str, timeout: float = 60.0) -> str:
    def node() -> str | None:
        pod = cluster.pods("default").get(name)
        return (pod or {}).get("spec", {}).get("nodeName") or None

    return wait_until(node, timeout, f"pod {name} bound")


@pytest.mark.kube
@pytest.mark.slow
def test_kube_scheduler_places_pods_by_scorers_scores_and_goes_on_without_it(tmp_path: Path) -> None:
    binary = kube_scheduler_binary()
    with ControlPlane(tmp_path / "plane", audit=False) as plane:
        cluster = Cluster(plane)
        cluster.create_all([node_manifest(name) for name in ("busy", "idle", "half")])
        tainted = node_manifest("tainted")
        tainted["spec"] = {"taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]}
        cluster.create_all([tainted])
        (tmp_path / "scorer.yaml").write_text(SCORER_CONFIG)
        (tmp_path / "snapshot.yaml").write_text(SNAPSHOT)
        scorer = ScorerProcess(tmp_path, tmp_path / "scorer.yaml", plane.kubeconfig, name="scorer-extender",
                               extra_args=("--extender-profile", PROFILE, "--no-scheduling",
                                           "--metrics", str(tmp_path / "snapshot.yaml")))
        scheduler = None
        try:
            scorer.wait_ready()
            config = tmp_path / "kube-scheduler.json"
            config.write_text(json.dumps(kube_scheduler_config(plane.kubeconfig, scorer.port)))
            # the first pod before kube-scheduler starts: scorer's watch has it by the time it is asked about
            cluster.create_all([pod_manifest("web-0", scheduler="default-scheduler", cpu="500m")])
            with open(tmp_path / "kube-scheduler.log", "wb") as log:
                scheduler = subprocess.Popen([binary, f"--config={config}", f"--secure-port={free_port()}",
                                              "--bind-address=127.0.0.1", "-v=2"],
                                             stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            placed = [bound_to(cluster, "web-0")]
            for i in range(1, 3):  # one at a time: each sees the ones before it in flight
                cluster.create_all([pod_manifest(f"web-{i}", scheduler="default-scheduler", cpu="500m")])
                placed.append(bound_to(cluster, f"web-{i}"))
            # scorer's scores decide: the idle, quiet node twice (kube-scheduler alone would put the second pod
            # on another empty node); then the two pods in flight there (their CPU estimate, and each counted
            # at NetworkTraffic's per-pod traffic) make it score no better than half, and kube-scheduler's own
            # plugins break the tie. The busy node is filtered out by scorer, the tainted one by kube-scheduler.
            log = (tmp_path / "kube-scheduler.log").read_text()[-3000:]
            assert placed[:2] == ["idle", "idle"] and set(placed) <= {"idle", "half"}, (placed, log)
            assert scorer.metric("scorer_extender_requests_total", {"verb": "filter", "result": "success"}) >= 3
            assert scorer.metric("scorer_extender_requests_total", {"verb": "prioritize", "result": "success"}) >= 3
            assert scorer.metric("scorer_extender_requests_total", {"result": "bad_request"}) == 0
            assert scorer.metric("scorer_extender_unknown_nodes_total") == 0
            # kube-scheduler sends the pod as the API server wrote it to scorer's watch, byte for byte: the first
            # pod's filter took it from the watch by its JSON (a pod created while kube-scheduler runs may reach
            # kube-scheduler's watch before scorer's: that one is read from the request)
            assert scorer.metric("scorer_extender_pods_by_json_total") >= 1

            assert scorer.terminate() == 0  # ignorable: true: kube-scheduler goes on without it
            cluster.create_all([pod_manifest("after", scheduler="default-scheduler", cpu="500m")])
            assert bound_to(cluster, "after") in {"busy", "half", "idle"}  # still never the tainted node
        finally:
            scorer.stop()
            if scheduler is not None:
                end_process(scheduler)
