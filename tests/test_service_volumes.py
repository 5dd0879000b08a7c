"""`scorer run` with the four volume plugins against a real kube-apiserver 1.20.2 and its PersistentVolume controller.

The module runs a control plane of its own (nodes and volumes are cluster-wide), without
CSIStorageCapacities (the 1.20 default: scorer must become ready without them), with
kube-controller-manager running only the PersistentVolume controller (``kubekit.ControllerManager``,
resyncing every second) and one ``scorer run`` process. Three nodes: node-1 and node-3 in zone-a,
node-2 in zone-b. Each test has a namespace of its own and deletes its pods afterwards; every wait
is bounded and everything listens on 127.0.0.1.

Each test checks where the pods went and that no binding is half done: a bound pod's claims are
all Bound to volumes whose claimRef is the claim (uid) and whose node affinity holds on the pod's
node, scorer bound each pod once, and every volume write of scorer's succeeded (the audit log).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubekit import ControllerManager, ControlPlane, delete_storage, local_volume, provision_volume
from servicekit import Cluster, ScorerProcess, node_manifest, pod_manifest, scheduler_config, wait_until

from scorer.kube.early import USER_AGENT

pytestmark = [pytest.mark.kube, pytest.mark.slow]

SCHEDULER = "scorer-volumes"
ZONE = "topology.kubernetes.io/zone"
NODES = {"node-1": "zone-a", "node-2": "zone-b", "node-3": "zone-a"}
WAIT = 90.0  # seconds for each step: the machine is shared and busy; the controller resyncs every second
SELECTED_NODE = "volume.kubernetes.io/selected-node"


@pytest.fixture(scope="module")
def plane(tmp_path_factory) -> Iterator[ControlPlane]:
    with ControlPlane(tmp_path_factory.mktemp("volumes-plane"), storage_capacity=False) as control_plane:
        yield control_plane


@pytest.fixture(scope="module")
def controller(plane, tmp_path_factory) -> Iterator[ControllerManager]:
    with ControllerManager(plane, tmp_path_factory.mktemp("volumes-kcm")) as manager:
        yield manager


@pytest.fixture(scope="module")
def scorer(plane, controller, tmp_path_factory) -> Iterator[ScorerProcess]:
    cluster = Cluster(plane)
    cluster.create_all([node_manifest(name, labels={ZONE: zone}) for name, zone in NODES.items()])
    workdir = tmp_path_factory.mktemp("volumes-scorer")
    proc = ScorerProcess(workdir, scheduler_config(workdir / "config.yaml", SCHEDULER), plane.kubeconfig,
                         name="scorer-volumes", extra_args=("--seed", "7"))
    try:
        proc.wait_ready(WAIT)
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def namespace(request, plane, scorer) -> Iterator[str]:
    name = request.node.name.removeprefix("test_")[:40].rstrip("_").replace("_", "-")
    cluster = Cluster(plane)
    cluster.ensure_namespace(name)
    yield name
    cluster.delete_pods(name)


# --- objects


def claim(name: str, namespace: str, storage_class: str = "", *, access: str = "ReadWriteOnce") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": namespace},
            "spec": {"accessModes": [access], "storageClassName": storage_class,
                     "resources": {"requests": {"storage": "1Gi"}}}}


def storage_class(name: str, provisioner: str, mode: str) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": provisioner, "volumeBindingMode": mode}


def pod_with(name: str, namespace: str, *claims: str, spec: dict[str, Any] | None = None,
             volumes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    listed = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return pod_manifest(name, namespace=namespace, scheduler=SCHEDULER,
                        spec={"volumes": listed + (volumes or []), **(spec or {})})


def on_nodes(*names: str, prefer: str | None = None) -> dict[str, Any]:
    """Required node affinity to ``names`` (and a preference for ``prefer``)."""
    affinity: dict[str, Any] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(names)}]}]}}
    if prefer:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [{"weight": 100, "preference": {
            "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [prefer]}]}}]
    return {"affinity": {"nodeAffinity": affinity}}


class Storage:
    """Creates storage objects for one test and deletes them (finalizers dropped) at the end."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.cluster = Cluster(plane)
        self.created: list[str] = []

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        if obj["kind"] == "StorageClass":
            collection = "/apis/storage.k8s.io/v1/storageclasses"
        elif obj["kind"] == "CSINode":
            collection = "/apis/storage.k8s.io/v1/csinodes"
        elif obj["kind"] == "PersistentVolume":
            collection = "/api/v1/persistentvolumes"
        else:
            collection = f"/api/v1/namespaces/{meta['namespace']}/persistentvolumeclaims"
        created = self.cluster.call("POST", collection, obj)
        self.created.append(f"{collection}/{meta['name']}")
        return dict(created)

    def claim(self, namespace: str, name: str) -> dict[str, Any]:
        return dict(self.cluster.call("GET", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}"))

    def volume(self, name: str) -> dict[str, Any]:
        return dict(self.cluster.call("GET", f"/api/v1/persistentvolumes/{name}"))

    def bound_claim(self, namespace: str, name: str) -> dict[str, Any]:
        return wait_until(lambda: (c := self.claim(namespace, name))["status"].get("phase") == "Bound" and c,
                          WAIT, f"claim {namespace}/{name} bound by the PersistentVolume controller")

    def delete_all(self) -> None:
        for path in reversed(self.created):
            delete_storage(self.plane, path)


@pytest.fixture
def storage(plane) -> Iterator[Storage]:
    made = Storage(plane)
    yield made
    made.delete_all()


def bound(plane: ControlPlane, namespace: str, count: int) -> dict[str, str]:
    cluster = Cluster(plane)
    return wait_until(lambda: len(placed := cluster.bound(namespace)) >= count and placed, WAIT,
                      f"{count} pods of {namespace} bound")


def pod_scheduled(plane: ControlPlane, namespace: str, name: str) -> dict[str, Any] | None:
    conditions = Cluster(plane).pods(namespace)[name]["status"].get("conditions") or []
    return next((c for c in conditions if c["type"] == "PodScheduled"), None)


def unschedulable_with(plane: ControlPlane, namespace: str, name: str, text: str) -> str:
    def message() -> str:
        condition = pod_scheduled(plane, namespace, name)
        return condition["message"] if condition and text in condition.get("message", "") else ""
    return str(wait_until(message, WAIT, f"{namespace}/{name} unschedulable with {text!r}"))


def affinity_nodes(volume: dict[str, Any]) -> set[str] | None:
    """The hostnames a local volume's node affinity allows (None: any node)."""
    required = (volume["spec"].get("nodeAffinity") or {}).get("required")
    if not required:
        return None
    return {value for term in required["nodeSelectorTerms"] for expr in term.get("matchExpressions", [])
            if expr["key"] == "kubernetes.io/hostname" for value in expr["values"]}


def check_nothing_half_done(plane: ControlPlane, namespace: str) -> None:
    """Every bound pod of ``namespace``: its claims Bound to volumes claimed by them (uid) that may be on
    its node; scorer bound it once, and every volume write of scorer's in the namespace succeeded."""
    cluster = Cluster(plane)
    pods = cluster.pods(namespace)
    for name, pod in pods.items():
        node = pod["spec"].get("nodeName")
        if not node:
            continue
        for volume in pod["spec"].get("volumes") or []:
            source = volume.get("persistentVolumeClaim")
            if not source:
                continue
            claims = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
            claimed = cluster.call("GET", f"{claims}/{source['claimName']}")
            assert claimed["status"].get("phase") == "Bound", (name, claimed)
            pv = cluster.call("GET", f"/api/v1/persistentvolumes/{claimed['spec']['volumeName']}")
            assert pv["spec"]["claimRef"]["uid"] == claimed["metadata"]["uid"], (name, pv)
            allowed = affinity_nodes(pv)
            assert allowed is None or node in allowed, (name, node, pv["metadata"]["name"], allowed)
    requests = [r for r in plane.audited_requests() if r.user_agent == USER_AGENT and r.namespace in (namespace, "")]
    bindings = [r for r in requests if (r.resource, r.subresource) == ("pods", "binding") and r.namespace == namespace]
    assert sorted(r.name for r in bindings) == sorted(n for n, p in pods.items() if p["spec"].get("nodeName"))
    assert all(r.code == 201 for r in bindings), [(r.name, r.code) for r in bindings]
    writes = [r for r in requests
              if r.resource in ("persistentvolumes", "persistentvolumeclaims") and r.verb == "patch"]
    assert all(r.code == 200 for r in writes), [(r.resource, r.name, r.code) for r in writes]


# --- the tests


def test_scorer_is_ready_without_storage_capacities_and_says_so_once(scorer) -> None:
    lines = [line for line in scorer.log().splitlines() if "csistoragecapacities reflector" in line]
    assert len(lines) == 1 and "serves none of /apis/storage.k8s.io/v1," in lines[0], lines
    assert scorer.probe("/readyz") == 200


def test_a_pre_bound_local_volume_pins_its_pod_to_the_volumes_node(plane, storage, namespace) -> None:
    made = storage.create(claim("data", namespace))
    storage.create(local_volume("a-pv", "node-2", storage_class="", claim=made))
    storage.bound_claim(namespace, "data")
    Cluster(plane).create_all([pod_with("app", namespace, "data")])
    assert bound(plane, namespace, 1) == {"app": "node-2"}
    check_nothing_half_done(plane, namespace)


def test_each_pod_of_a_set_gets_the_free_local_volume_of_its_node(plane, storage, namespace) -> None:
    """A StatefulSet's pods, each with its own claim of a WaitForFirstConsumer class and one local
    volume per node: scorer picks a node with a free volume for each pod and claims it (PreBind);
    the controller completes the bindings."""
    storage.create(storage_class("local", "kubernetes.io/no-provisioner", "WaitForFirstConsumer"))
    for node in NODES:
        storage.create(local_volume(f"b-pv-{node}", node, storage_class="local"))
    for i in range(3):
        storage.create(claim(f"data-web-{i}", namespace, "local"))
    Cluster(plane).create_all([pod_with(f"web-{i}", namespace, f"data-web-{i}") for i in range(3)])
    placed = bound(plane, namespace, 3)
    assert sorted(placed.values()) == sorted(NODES)  # one volume per node: one pod per node
    for i in range(3):
        pvc = storage.bound_claim(namespace, f"data-web-{i}")
        assert pvc["spec"]["volumeName"] == f"b-pv-{placed[f'web-{i}']}"
        assert pvc["metadata"]["annotations"].get(SELECTED_NODE) is None  # static binding: no selected node
    check_nothing_half_done(plane, namespace)


def test_an_unbound_immediate_claim_keeps_its_pod_pending_until_the_controller_binds_it(
        plane, storage, namespace) -> None:
    storage.create(storage_class("c-immediate", "kubernetes.io/no-provisioner", "Immediate"))
    storage.create(claim("data", namespace, "c-immediate"))
    Cluster(plane).create_all([pod_with("app", namespace, "data")])
    message = unschedulable_with(plane, namespace, "app", "pod has unbound immediate PersistentVolumeClaims")
    events = [e for e in Cluster(plane).events(namespace, "app") if e["reason"] == "FailedScheduling"]
    assert events and events[0]["note"] == message
    assert Cluster(plane).bound(namespace) == {}
    storage.create(local_volume("c-pv", "node-3", storage_class="c-immediate"))  # the controller binds it
    storage.bound_claim(namespace, "data")
    assert bound(plane, namespace, 1) == {"app": "node-3"}
    check_nothing_half_done(plane, namespace)


def test_a_volume_in_zone_a_keeps_its_pods_in_zone_a(plane, storage, namespace) -> None:
    made = storage.create(claim("shared", namespace, access="ReadWriteMany"))
    volume = {"apiVersion": "v1", "kind": "PersistentVolume",
              "metadata": {"name": "d-pv", "labels": {ZONE: "zone-a"}},
              "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
                       "nfs": {"server": "10.0.0.1", "path": "/shared"},
                       "claimRef": {"namespace": namespace, "name": "shared", "uid": made["metadata"]["uid"]}}}
    storage.create(volume)
    storage.bound_claim(namespace, "shared")
    Cluster(plane).create_all([pod_with(f"app-{i}", namespace, "shared") for i in range(4)])
    placed = bound(plane, namespace, 4)
    assert set(placed.values()) <= {n for n, zone in NODES.items() if zone == "zone-a"}, placed
    check_nothing_half_done(plane, namespace)


def csi_volume(name: str, handle: str, made: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                     "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": handle},
                     "claimRef": {"namespace": made["metadata"]["namespace"], "name": made["metadata"]["name"],
                                  "uid": made["metadata"]["uid"]}}}


def test_a_node_at_its_csi_volume_limit_gets_no_other_volume_of_that_driver(plane, storage, namespace) -> None:
    storage.create({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "node-1"},
                    "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-node-1",
                                          "allocatable": {"count": 1}}]}})
    for i in (1, 2, 3):
        made = storage.create(claim(f"ebs-{i}", namespace))
        storage.create(csi_volume(f"e-pv-{i}", f"vol-{i}", made))
        storage.bound_claim(namespace, f"ebs-{i}")
    cluster = Cluster(plane)
    on_node_1 = {"nodeSelector": {"kubernetes.io/hostname": "node-1"}}
    cluster.create_all([pod_with("first", namespace, "ebs-1", spec=on_node_1)])
    assert bound(plane, namespace, 1) == {"first": "node-1"}
    # node-1 is preferred and allowed, but its one ebs volume is taken.
    cluster.create_all([pod_with("second", namespace, "ebs-2", spec=on_nodes("node-1", "node-2", prefer="node-1"))])
    assert bound(plane, namespace, 2)["second"] == "node-2"
    cluster.create_all([pod_with("third", namespace, "ebs-3", spec=on_node_1)])
    unschedulable_with(plane, namespace, "third", "node(s) exceed max volume count")
    assert "third" not in cluster.bound(namespace)
    check_nothing_half_done(plane, namespace)


def test_pods_with_the_same_read_write_gce_disk_never_share_a_node(plane, namespace) -> None:
    disk = [{"name": "disk", "gcePersistentDisk": {"pdName": "f-disk", "fsType": "ext4"}}]
    spec = on_nodes("node-1", "node-2", prefer="node-1")
    Cluster(plane).create_all([pod_with(f"app-{i}", namespace, spec=spec, volumes=disk) for i in range(2)])
    placed = bound(plane, namespace, 2)
    assert sorted(placed.values()) == ["node-1", "node-2"], placed
    Cluster(plane).create_all([pod_with("app-2", namespace, spec=spec, volumes=disk)])
    unschedulable_with(plane, namespace, "app-2", "node(s) had no available disk")
    assert "app-2" not in Cluster(plane).bound(namespace)
    check_nothing_half_done(plane, namespace)


class Provisioner:
    """An external provisioner for ``storage_class``, as a thread of the test: it polls the claims of
    ``namespace`` and, for each one of that class whose ``volume.kubernetes.io/selected-node`` scorer
    set, creates a volume on that node with claimRef to the claim (``kubekit.provision_volume``), as
    a CSI external-provisioner would; the PersistentVolume controller then binds them."""

    NAME = "example.com/test"

    def __init__(self, plane: ControlPlane, namespace: str, storage_class: str, storage: Storage) -> None:
        self.plane, self.namespace, self.storage_class, self.storage = plane, namespace, storage_class, storage
        self.provisioned: dict[str, str] = {}  # claim -> node
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="test-provisioner", daemon=True)

    def _run(self) -> None:
        cluster = Cluster(self.plane)
        while not self._stop.wait(0.2):
            claims = cluster.call("GET", f"/api/v1/namespaces/{self.namespace}/persistentvolumeclaims")["items"]
            for item in claims:
                name = item["metadata"]["name"]
                node = (item["metadata"].get("annotations") or {}).get(SELECTED_NODE)
                if item["spec"].get("storageClassName") == self.storage_class and node and name not in self.provisioned:
                    volume = f"pvc-{item['metadata']['uid']}"
                    provision_volume(self.plane, self.namespace, name, node, name=volume, provisioner=self.NAME)
                    self.storage.created.append(f"/api/v1/persistentvolumes/{volume}")
                    self.provisioned[name] = node

    def __enter__(self) -> Provisioner:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def test_a_claim_of_a_provisioned_class_gets_a_volume_on_the_node_scorer_chose(plane, storage, namespace) -> None:
    storage.create(storage_class("g-provisioned", Provisioner.NAME, "WaitForFirstConsumer"))
    storage.create(claim("data", namespace, "g-provisioned"))
    with Provisioner(plane, namespace, "g-provisioned", storage) as provisioner:
        Cluster(plane).create_all([pod_with("app", namespace, "data", spec=on_nodes("node-1", "node-3"))])
        placed = bound(plane, namespace, 1)
    assert placed["app"] in ("node-1", "node-3")
    assert provisioner.provisioned == {"data": placed["app"]}
    pvc = storage.bound_claim(namespace, "data")
    assert pvc["metadata"]["annotations"][SELECTED_NODE] == placed["app"]
    assert affinity_nodes(storage.volume(pvc["spec"]["volumeName"])) == {placed["app"]}
    check_nothing_half_done(plane, namespace)


def test_a_claim_deleted_while_its_pod_waits_for_provisioning_fails_the_binding_and_is_named(
        plane, scorer, storage, namespace) -> None:
    """No provisioner serves ``example.com/absent``: scorer writes the claim's selected-node and waits in
    PreBind. The claim is deleted meanwhile: the wait ends at once with kube's error naming the claim, the
    pod is not bound and is retried (then PreFilter names the missing claim), and scorer keeps running."""
    storage.create(storage_class("h-absent", "example.com/absent", "WaitForFirstConsumer"))
    path = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/data"
    storage.create(claim("data", namespace, "h-absent"))
    Cluster(plane).create_all([pod_with("app", namespace, "data")])
    wait_until(lambda: SELECTED_NODE in (storage.claim(namespace, "data")["metadata"].get("annotations") or {}),
               WAIT, "scorer's PreBind to write the claim's selected node")
    delete_storage(plane, path)
    failed = unschedulable_with(plane, namespace, "app", 'persistentvolumeclaim "data" not found')
    assert failed.startswith(("running PreBind plugin \"VolumeBinding\": binding volumes: ", "0/3 nodes are available"))
    notes = [e["note"] for e in Cluster(plane).events(namespace, "app") if e["reason"] == "FailedScheduling"]
    # kube's assume-cache wording: ... could not find v1.PersistentVolumeClaim "<ns>/data"
    assert any(note.startswith('running PreBind plugin "VolumeBinding": binding volumes: failed to check '
                               'provisioning pvc: ') and f'"{namespace}/data"' in note for note in notes), notes
    assert Cluster(plane).bound(namespace) == {}
    assert scorer.probe("/healthz") == 200 and "Traceback" not in scorer.log()
