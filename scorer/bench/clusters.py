"""A synthetic cluster for a workload at a node count, as API objects (``build_setup``).

scheduler_perf's way (test/integration/scheduler_perf): nodes of one
template (the workload's ``node``: 4 CPU, 32Gi, 110 pods by default), unique
hostnames, zones round-robin, Ready; init pods bound before measuring, placed
as the scheduler would have placed them (the anti-affinity group one per
node, the low-priority pods of the preemption shape four per node, the rest
round-robin); then the measured pods, pending. Pods are full v1 Pods (one
pause container, requests = limits) in namespace ``bench`` (the parity shapes
use ``sched-0`` for init pods and ``sched-1`` for measured ones, as
scheduler_perf does); the Namespaces come with them, so the same Setup can be
created through a real API server.

The volume shapes (scheduler_perf's SchedulingInTreePVs / SchedulingCSIPVs
way: one claim per measured pod) add the storage objects to ``Setup.storage``:
``volumes`` gives each measured pod a claim pre-bound to a local PersistentVolume
whose node affinity names one node (round-robin), so VolumeBinding pins the pod
there; ``volumes-wait`` gives each a WaitForFirstConsumer claim of a
``kubernetes.io/no-provisioner`` class and one Available local PV per measured
pod, round-robin over the nodes, so VolumeBinding matches a free PV per node and
binds it at PreBind (end to end, the PersistentVolume controller completes the
binding).

A metric-driven profile (anything but ``default``) gets a generated metrics
snapshot in ``Setup.metrics``: every node a CPU utilization of 5-95% and a
network receive rate of 0.1-100 MB/s, from the seed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from scorer.bench.spec import Setup
from scorer.bench.workloads import InitPods, MeasuredPods, NodeShape, Workload, scheduler_name
from scorer.sources import MetricsSnapshot

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
PAUSE = "registry.k8s.io/pause:3.10"
NAMESPACE = "bench"
INIT_NAMESPACE, MEASURED_NAMESPACE = "sched-0", "sched-1"  # scheduler_perf's namespaces of the parity shapes
CPU_METRIC = "cpu_utilization"
NETWORK_METRIC = "network_receive_bytes_per_second"

Json = dict[str, Any]


def build_setup(workload: Workload, nodes: int, pods: int, seed: int = 0) -> Setup:
    """``nodes`` nodes, the workload's init pods for that size, ``pods`` measured pods."""
    node_objects = make_nodes(nodes, workload.node)
    names = [n["metadata"]["name"] for n in node_objects]
    build = _SHAPES[workload.shape]
    setup = build(_Context(workload, names, workload.init_pods.number(nodes), pods, scheduler_name(workload)))
    snapshot = metrics_snapshot(names, seed) if workload.profile != "default" else None
    return Setup(node_objects, setup.init, setup.measured, setup.namespaces, setup.workloads, snapshot,
                 storage=setup.storage)


def make_nodes(count: int, shape: NodeShape) -> list[Json]:
    """``count`` nodes of ``shape``: ``node-00000``..., hostname and zone labels plus the shape's."""
    width = max(5, len(str(count - 1)))
    resources = {"cpu": shape.cpu, "memory": shape.memory, "pods": str(shape.pods), "ephemeral-storage": "100Gi"}
    nodes = []
    for i in range(count):
        name = f"node-{i:0{width}d}"
        labels = {**shape.labels, HOSTNAME: name, ZONE: shape.zones[i % len(shape.zones)]}
        nodes.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {},
            "status": {"allocatable": dict(resources), "capacity": dict(resources),
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]},
        })
    return nodes


def make_pod(
    name: str,
    namespace: str,
    resources: InitPods | MeasuredPods,
    *,
    scheduler: str,
    node: str = "",
    labels: Mapping[str, str] | None = None,
    affinity: Mapping[str, Any] | None = None,
    spread: list[Json] | None = None,
    owner: Json | None = None,
    port: bool = False,
    claim: str = "",
) -> Json:
    """scheduler_perf's pod templates: one pause container, requests = limits."""
    amounts = {"cpu": resources.cpu, "memory": resources.memory}
    container: Json = {"name": "pause", "image": PAUSE, "resources": {"requests": amounts, "limits": dict(amounts)}}
    if port:
        container["ports"] = [{"containerPort": 80}]
    spec: Json = {"schedulerName": scheduler, "containers": [container]}
    if node:
        spec["nodeName"] = node
    if resources.priority is not None:
        spec["priority"] = resources.priority
    if affinity is not None:
        spec["affinity"] = affinity
    if spread is not None:
        spec["topologySpreadConstraints"] = spread
    if claim:
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    meta: Json = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}", "labels": dict(labels or {})}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                    "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                    "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def namespace(name: str) -> Json:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def metrics_snapshot(node_names: list[str], seed: int) -> MetricsSnapshot:
    """Random CPU utilization (5-95%) and network receive rate (0.1-100 MB/s) per node, fresh (age 10 s)."""
    rng = np.random.default_rng(seed)
    cpu = rng.uniform(0.05, 0.95, len(node_names))
    net = rng.uniform(1e5, 1e8, len(node_names))
    return MetricsSnapshot({
        CPU_METRIC: {n: (float(c), 10.0) for n, c in zip(node_names, cpu, strict=True)},
        NETWORK_METRIC: {n: (float(b), 10.0) for n, b in zip(node_names, net, strict=True)},
    }, "bench metrics snapshot")


# -- the shapes ---------------------------------------------------------------------------


class _Context:
    """What a shape builder needs: the workload, the node names, how many init and measured pods."""

    def __init__(self, workload: Workload, nodes: list[str], init: int, measured: int, scheduler: str) -> None:
        self.workload, self.nodes, self.init, self.measured, self.scheduler = workload, nodes, init, measured, scheduler

    def spread(self, count: int, per_node: int = 1) -> list[str]:
        """Node names for ``count`` init pods: ``per_node`` on each node in turn, wrapping around."""
        n = len(self.nodes)
        return [self.nodes[(i // per_node) % n] for i in range(count)] if n else []

    def init_pod(self, i: int, node: str, namespace: str = NAMESPACE, **kw: Any) -> Json:
        return make_pod(f"init-{i:06d}", namespace, self.workload.init_pods, scheduler=self.scheduler, node=node, **kw)

    def measured_pod(self, k: int, namespace: str = NAMESPACE, prefix: str = "pod", **kw: Any) -> Json:
        return make_pod(f"{prefix}-{k:06d}", namespace, self.workload.pods, scheduler=self.scheduler, **kw)

    def plain_init(self) -> list[Json]:
        return [self.init_pod(i, node) for i, node in enumerate(self.spread(self.init))]


def _plain(ctx: _Context) -> Setup:
    """SchedulingBasic: pod-default init pods round-robin, then pod-default pods."""
    return Setup([], ctx.plain_init(), [ctx.measured_pod(k) for k in range(ctx.measured)], [namespace(NAMESPACE)])


def _node_affinity(ctx: _Context) -> Setup:
    """Measured pods that require the first zone of the node shape (a 1/zones share of the nodes)."""
    zone = ctx.workload.node.zones[0]
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]}}}
    measured = [ctx.measured_pod(k, affinity=affinity) for k in range(ctx.measured)]
    return Setup([], ctx.plain_init(), measured, [namespace(NAMESPACE)])


def _pod_term(selector: Json, topology: str) -> Json:
    return {"labelSelector": selector, "topologyKey": topology, "namespaces": [MEASURED_NAMESPACE, INIT_NAMESPACE]}


GROUP = {"color": "green", "name": "test"}
ANTI_AFFINITY = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    _pod_term({"matchLabels": {"color": "green"}}, HOSTNAME)]}}
PREFERRED_AFFINITY = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 1, "podAffinityTerm": _pod_term({"matchLabels": {"foo": ""}}, HOSTNAME)}]}}
PREFERRED_ANTI_AFFINITY = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 1, "podAffinityTerm": _pod_term({"matchLabels": {"foo": ""}}, HOSTNAME)}]}}
REQUIRED_AFFINITY = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    _pod_term({"matchLabels": {"foo": ""}}, ZONE)]}}
SPREAD = [{"maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchExpressions": [{"key": "color", "operator": "In", "values": ["blue"]}]}}]


def _parity_namespaces() -> list[Json]:
    return [namespace(INIT_NAMESPACE), namespace(MEASURED_NAMESPACE)]


def _pod_anti_affinity(ctx: _Context) -> Setup:
    """SchedulingPodAntiAffinity: the group (color=green, required anti-affinity to color=green on the
    hostname) in sched-0, one per node as the scheduler placed them; the measured group in sched-1."""
    init = [ctx.init_pod(i, ctx.nodes[i], INIT_NAMESPACE, labels=GROUP, affinity=ANTI_AFFINITY, port=True)
            for i in range(min(ctx.init, len(ctx.nodes)))]
    measured = [ctx.measured_pod(k, MEASURED_NAMESPACE, labels=GROUP, affinity=ANTI_AFFINITY, port=True)
                for k in range(ctx.measured)]
    return Setup([], init, measured, _parity_namespaces())


def _with_term(affinity: Json) -> Callable[[_Context], Setup]:
    """A parity shape whose init (sched-0) and measured (sched-1) pods are foo="" with ``affinity``."""

    def build(ctx: _Context) -> Setup:
        init = [ctx.init_pod(i, node, INIT_NAMESPACE, labels={"foo": ""}, affinity=affinity)
                for i, node in enumerate(ctx.spread(ctx.init))]
        measured = [ctx.measured_pod(k, MEASURED_NAMESPACE, labels={"foo": ""}, affinity=affinity)
                    for k in range(ctx.measured)]
        return Setup([], init, measured, _parity_namespaces())

    return build


def _topology_spread(ctx: _Context) -> Setup:
    """TopologySpreading: pod-default init pods, then color=blue pods, maxSkew 5 over the zone, DoNotSchedule."""
    measured = [ctx.measured_pod(k, labels={"color": "blue"}, spread=SPREAD) for k in range(ctx.measured)]
    return Setup([], ctx.plain_init(), measured, [namespace(NAMESPACE)])


def _default_spreading(ctx: _Context) -> Setup:
    """DefaultTopologySpreading: a ReplicaSet and a Service selecting app=web, the ReplicaSet's pods with no
    constraints of their own: PodTopologySpread's system defaults spread them."""
    template = make_pod("web", NAMESPACE, ctx.workload.pods, scheduler=ctx.scheduler, labels={"app": "web"})
    replicaset = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                  "metadata": {"name": "web", "namespace": NAMESPACE, "uid": "uid-bench-web-rs"},
                  "spec": {"replicas": ctx.measured, "selector": {"matchLabels": {"app": "web"}},
                           "template": {"metadata": {"labels": {"app": "web"}}, "spec": template["spec"]}}}
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "web", "namespace": NAMESPACE, "uid": "uid-bench-web-svc"},
               "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}
    measured = [ctx.measured_pod(k, prefix="web", labels={"app": "web"}, owner=replicaset) for k in range(ctx.measured)]
    return Setup([], ctx.plain_init(), measured, [namespace(NAMESPACE)], [replicaset, service])


def _preemption(ctx: _Context) -> Setup:
    """PreemptionBasic: low-priority init pods four per node, then high-priority pods that fit only by
    preempting (with the default file's requests: 900m x 4 fill a 4-CPU node, a 3-CPU pod needs three gone)."""
    init = [ctx.init_pod(i, node, port=True) for i, node in enumerate(ctx.spread(ctx.init, per_node=4))]
    measured = [ctx.measured_pod(k, prefix="high", port=True) for k in range(ctx.measured)]
    return Setup([], init, measured, [namespace(NAMESPACE)])


VOLUME_SIZE = "1Gi"
WAIT_CLASS = "local-wait"


def _local_pv(name: str, node: str, storage_class: str, claim: Json | None) -> Json:
    """A local PersistentVolume on ``node`` (the node affinity a local volume must have); pre-bound to
    ``claim`` when given, else Available (the phase the PersistentVolume controller gives a new PV)."""
    spec: Json = {
        "capacity": {"storage": VOLUME_SIZE}, "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Retain", "storageClassName": storage_class,
        "volumeMode": "Filesystem", "local": {"path": f"/mnt/disks/{name}"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}]}},
    }
    if claim is not None:  # by name: the API server gives the claim a uid of its own
        meta = claim["metadata"]
        spec["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": meta["namespace"],
                            "name": meta["name"]}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "uid": f"uid-{name}"},
            "spec": spec, "status": {"phase": "Available"}}


def _claim(name: str, storage_class: str, volume: str = "") -> Json:
    """A claim of ``VOLUME_SIZE``; with ``volume``, pre-bound to it (``spec.volumeName``, the volume's claimRef
    naming the claim): the PersistentVolume controller completes the binding (in memory at once)."""
    meta: Json = {"name": name, "namespace": NAMESPACE, "uid": f"uid-{NAMESPACE}-{name}"}
    spec: Json = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": VOLUME_SIZE}},
                  "storageClassName": storage_class, "volumeMode": "Filesystem"}
    if volume:
        spec["volumeName"] = volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec,
            "status": {"phase": "Pending"}}


def _volumes(ctx: _Context) -> Setup:
    """Each measured pod with its own claim, pre-bound to a local PV on node k mod N (InTreePVs' shape with
    node affinity): VolumeBinding's Filter passes that node alone."""
    storage: list[Json] = []
    measured = []
    for k in range(ctx.measured):
        claim = _claim(f"claim-{k:06d}", "", volume=f"pv-{k:06d}")
        storage += [_local_pv(f"pv-{k:06d}", ctx.nodes[k % len(ctx.nodes)], "", claim), claim]
        measured.append(ctx.measured_pod(k, claim=claim["metadata"]["name"]))
    return Setup([], ctx.plain_init(), measured, [namespace(NAMESPACE)], storage=storage)


def _volumes_wait(ctx: _Context) -> Setup:
    """Each measured pod with its own unbound claim of a WaitForFirstConsumer class without a provisioner, and
    one Available local PV per measured pod round-robin over the nodes: VolumeBinding finds a free PV per
    node, Reserve assumes the chosen one, PreBind writes its claimRef."""
    wait_class = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": WAIT_CLASS},
                  "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer",
                  "reclaimPolicy": "Retain"}
    storage: list[Json] = [wait_class]
    measured = []
    for k in range(ctx.measured):
        claim = _claim(f"claim-{k:06d}", WAIT_CLASS)
        storage += [_local_pv(f"pv-{k:06d}", ctx.nodes[k % len(ctx.nodes)], WAIT_CLASS, None), claim]
        measured.append(ctx.measured_pod(k, claim=claim["metadata"]["name"]))
    return Setup([], ctx.plain_init(), measured, [namespace(NAMESPACE)], storage=storage)


_SHAPES: dict[str, Callable[[_Context], Setup]] = {
    "plain": _plain,
    "node-affinity": _node_affinity,
    "pod-anti-affinity": _pod_anti_affinity,
    "pod-affinity": _with_term(REQUIRED_AFFINITY),
    "preferred-pod-affinity": _with_term(PREFERRED_AFFINITY),
    "preferred-pod-anti-affinity": _with_term(PREFERRED_ANTI_AFFINITY),
    "topology-spread": _topology_spread,
    "default-spreading": _default_spreading,
    "preemption": _preemption,
    "volumes": _volumes,
    "volumes-wait": _volumes_wait,
}
