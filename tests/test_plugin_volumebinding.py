"""VolumeBinding: PreFilter's claim checks and classification, FindPodVolumes (bound claims' node
affinity, static PV selection, provisioning and capacity checks, CSI migration), Reserve/Unreserve
on the assume cache, PreBind's writes and wait, the args and the events.

Tables mirror kube 1.20.2's volume_binding_test.go (TestVolumeBinding) and
scheduler_binder_test.go (TestFindPodVolumesWithoutProvisioning, ...WithProvisioning,
...WithCSIMigration, TestAssumePodVolumes, TestRevertAssumedPodVolumes, TestBindAPIUpdate,
TestCheckBindings, TestCheckBindingsWithCSIMigration, TestBindPodVolumes, TestFindAssumeVolumes,
TestCapacity), with current kube's (1.33-1.35) texts, codes and capacity checks (reference §10.6).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

import attrs
import numpy as np
import pytest
from pluginkit import requeues

from scorer.config import load_config, structure
from scorer.errors import ConfigError, ScorerError
from scorer.framework import Code, CycleState, NodeBatch, Status
from scorer.framework.events import (
    CSI_DRIVER,
    CSI_NODE,
    CSI_STORAGE_CAPACITY,
    NODE,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
    ClusterEvent,
)
from scorer.model import (
    LabelSelector,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerReference,
    Pod,
)
from scorer.model.storage import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_MIGRATED_PLUGINS,
    ANN_SELECTED_NODE,
    IMMEDIATE,
    NO_PROVISIONER,
    WAIT_FOR_FIRST_CONSUMER,
    ClaimRef,
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    StorageObject,
    TopologySelectorTerm,
)
from scorer.plugins.volumebinding import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
    ERR_UNBOUND_IMMEDIATE,
    NAME,
    PodVolumes,
    StaticBinding,
    VolumeBinding,
    VolumeBindingArgs,
)
from scorer.plugins.volumebinding.binder import (
    BinderError,
    assume_pod_volumes,
    check_bindings,
    revert_pod_volumes,
    translated_affinity,
)
from scorer.registry import build_registry
from scorer.state.volumes import AssumeError
from scorer.testing import make_cache, make_handle, make_node, make_pod

G, GI, MI = 10**9, 2**30, 2**20
NS = "testns"
NODE_KEY = "nodeKey"
PROVISIONER = "test-provisioner"
WAIT, IMMEDIATE_CLASS, WAIT_PROVISIONER, TOPO_MISMATCH = (
    "waitClass", "immediateClass", "waitClassWithProvisioner", "topoMismatchClass")
UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE

CLASSES = (
    StorageClass(name=WAIT_PROVISIONER, volume_binding_mode=WAIT_FOR_FIRST_CONSUMER, provisioner=PROVISIONER,
                 allowed_topologies=(TopologySelectorTerm(
                     match_label_expressions=((NODE_KEY, ("node1", "reference-value")),)),)),
    StorageClass(name=IMMEDIATE_CLASS, volume_binding_mode=IMMEDIATE),
    StorageClass(name=WAIT, volume_binding_mode=WAIT_FOR_FIRST_CONSUMER, provisioner=NO_PROVISIONER),
    StorageClass(name=TOPO_MISMATCH, volume_binding_mode=WAIT_FOR_FIRST_CONSUMER, provisioner=PROVISIONER,
                 allowed_topologies=(TopologySelectorTerm(
                     match_label_expressions=((NODE_KEY, ("reference-value",)),)),)),
)

UNBOUND, PREBOUND, BOUND, SELECTED_NODE = range(4)


def make_pvc(name: str, size: int, node: str, state: int, pv_name: str, version: str, storage_class: str,
             **fields: Any) -> PersistentVolumeClaim:
    """kube's makeTestPVC."""
    annotations: dict[str, str] = {}
    volume_name = ""
    if state == SELECTED_NODE:
        annotations[ANN_SELECTED_NODE] = node
    if state == BOUND:
        annotations[ANN_BIND_COMPLETED] = "yes"
    if state in (BOUND, PREBOUND):
        volume_name = pv_name
    return PersistentVolumeClaim(namespace=NS, name=name, uid="pvc-uid", resource_version=version, request=size,
                                 storage_class=storage_class, annotations=annotations, volume_name=volume_name,
                                 **fields)


def node_affinity(key: str, *values: str) -> NodeSelector:
    return NodeSelector(terms=(NodeSelectorTerm(match_expressions=(
        NodeSelectorRequirement(key=key, operator="In", values=values),)),))


def make_pv(name: str, node: str, capacity: int, version: str, bound_to: PersistentVolumeClaim | None,
            storage_class: str, **fields: Any) -> PersistentVolume:
    """kube's makeTestPV."""
    claim_ref = None
    annotations: dict[str, str] = {}
    if bound_to is not None:
        claim_ref = ClaimRef(namespace=bound_to.namespace, name=bound_to.name, uid=bound_to.uid,
                             resource_version=bound_to.resource_version)
        annotations[ANN_BOUND_BY_CONTROLLER] = "yes"
    fields.setdefault("node_affinity", node_affinity(NODE_KEY, node) if node else None)
    return PersistentVolume(name=name, resource_version=version, capacity=capacity, storage_class=storage_class,
                            phase="Available", claim_ref=claim_ref, annotations=annotations, **fields)


unbound_pvc = make_pvc("unbound-pvc", 1 * G, "", UNBOUND, "", "1", WAIT)
unbound_pvc2 = make_pvc("unbound-pvc2", 5 * G, "", UNBOUND, "", "1", WAIT)
prebound_pvc = make_pvc("prebound-pvc", 1 * G, "", PREBOUND, "pv-node1a", "1", WAIT)
prebound_pvc_node1a = make_pvc("unbound-pvc", 1 * G, "", PREBOUND, "pv-node1a", "1", WAIT)
bound_pvc = make_pvc("bound-pvc", 1 * G, "", BOUND, "pv-bound", "1", WAIT)
bound_pvc_node1a = make_pvc("unbound-pvc", 1 * G, "", BOUND, "pv-node1a", "1", WAIT)
immediate_unbound_pvc = make_pvc("immediate-unbound-pvc", 1 * G, "", UNBOUND, "", "1", IMMEDIATE_CLASS)
immediate_bound_pvc = make_pvc("immediate-bound-pvc", 1 * G, "", BOUND, "pv-bound-immediate", "1", IMMEDIATE_CLASS)
provisioned_pvc = make_pvc("provisioned-pvc", 1 * GI, "", UNBOUND, "", "1", WAIT_PROVISIONER)
provisioned_pvc2 = make_pvc("provisioned-pvc2", 1 * GI, "", UNBOUND, "", "1", WAIT_PROVISIONER)
provisioned_pvc_higher = make_pvc("provisioned-pvc2", 1 * GI, "", UNBOUND, "", "2", WAIT_PROVISIONER)
provisioned_pvc_bound = make_pvc("provisioned-pvc", 1 * GI, "", BOUND, "pv-bound", "1", WAIT_PROVISIONER)
no_provisioner_pvc = make_pvc("no-provisioner-pvc", 1 * GI, "", UNBOUND, "", "1", WAIT)
topo_mismatch_pvc = make_pvc("topo-mismatch-pvc", 1 * GI, "", UNBOUND, "", "1", TOPO_MISMATCH)
selected_node_pvc = make_pvc("provisioned-pvc", 1 * GI, "node1", SELECTED_NODE, "", "1", WAIT_PROVISIONER)
bound_migration_pvc = make_pvc("pvc-migration-bound", 1 * G, "", BOUND, "pv-migration-bound", "1", WAIT)
prov_migration_pvc_bound = make_pvc("pvc-migration-provisioned", 1 * GI, "", BOUND, "pv-migration-bound", "1",
                                    WAIT_PROVISIONER)

pv_node1a = make_pv("pv-node1a", "node1", 5 * G, "1", None, WAIT)
pv_node1b = make_pv("pv-node1b", "node1", 10 * G, "1", None, WAIT)
pv_node1c = make_pv("pv-node1b", "node1", 5 * G, "1", None, WAIT)
pv_node2 = make_pv("pv-node2", "node2", 1 * G, "1", None, WAIT)
pv_bound = make_pv("pv-bound", "node1", 1 * G, "1", bound_pvc, WAIT)
pv_node1a_bound = make_pv("pv-node1a", "node1", 5 * G, "1", unbound_pvc, WAIT)
pv_node1b_bound = make_pv("pv-node1b", "node1", 10 * G, "1", unbound_pvc2, WAIT)
pv_node1b_bound_higher = make_pv("pv-node1b", "node1", 10 * G, "2", unbound_pvc2, WAIT)
pv_bound_immediate = make_pv("pv-bound-immediate", "node1", 1 * G, "1", immediate_bound_pvc, IMMEDIATE_CLASS)
pv_bound_immediate_node2 = make_pv("pv-bound-immediate", "node2", 1 * G, "1", immediate_bound_pvc, IMMEDIATE_CLASS)

ZONE1_LABELS = {"failure-domain.beta.kubernetes.io/zone": "us-east-1",
                "failure-domain.beta.kubernetes.io/region": "us-east-1a"}


def migration_pv(bound_to: PersistentVolumeClaim) -> PersistentVolume:
    """kube's makeTestPVForCSIMigration: an in-tree GCE PD without node affinity, zone labels."""
    return make_pv("pv-migration-bound", "", 1 * G, "1", bound_to, WAIT, labels=dict(ZONE1_LABELS),
                   in_tree="kubernetes.io/gce-pd", in_tree_handle="test-disk")


migration_pv_bound = migration_pv(bound_migration_pvc)
migration_pv_bound_to_unbound = migration_pv(unbound_pvc)

csi_node1_migrated = CSINode(name="node1", annotations={ANN_MIGRATED_PLUGINS: "kubernetes.io/gce-pd"})
csi_node1_not_migrated = CSINode(name="node1", annotations={ANN_MIGRATED_PLUGINS: ""})


def with_selected_node(pvc: PersistentVolumeClaim, node: str) -> PersistentVolumeClaim:
    return attrs.evolve(pvc, annotations={**pvc.annotations, ANN_SELECTED_NODE: node})


def without_annotations(pvc: PersistentVolumeClaim) -> PersistentVolumeClaim:
    return attrs.evolve(pvc, annotations={})


def without_claim_uid(pv: PersistentVolume) -> PersistentVolume:
    assert pv.claim_ref is not None
    return attrs.evolve(pv, claim_ref=attrs.evolve(pv.claim_ref, uid=""))


def pod_with(claims: Iterable[PersistentVolumeClaim | str], *, name: str = "test-pod", namespace: str = NS,
             ephemeral: Iterable[str] = (), uid: str | None = None) -> Pod:
    volumes: list[dict[str, Any]] = [
        {"name": f"vol{i}", "persistentVolumeClaim": {"claimName": c if isinstance(c, str) else c.name}}
        for i, c in enumerate(claims)]
    volumes += [{"name": v, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}} for v in ephemeral]
    pod = make_pod(name, namespace=namespace, spec={"volumes": volumes})
    return attrs.evolve(pod, uid=uid) if uid is not None else pod


def node1(**labels: str) -> Any:
    return make_node("node1", labels={NODE_KEY: "node1", **labels})


# -- harness -------------------------------------------------------------------------------


class Env:
    """A cache with nodes and storage objects, and the plugin over it."""

    def __init__(self, nodes: Iterable[Any] = (), objects: Iterable[StorageObject] = (),
                 *, classes: bool = True, timeout: int = 600, writer: Any = None) -> None:
        self.cache = make_cache(list(nodes))
        for obj in (*(CLASSES if classes else ()), *objects):
            self.cache.add_storage(obj)
        handle = make_handle(cache=self.cache)
        handle.binder = writer
        self.plugin = VolumeBinding(VolumeBindingArgs(bind_timeout_seconds=timeout), handle)
        self.state = CycleState()

    @property
    def volumes(self) -> Any:
        return self.cache.volumes

    def batch(self) -> NodeBatch:
        return NodeBatch(self.cache.table, np.arange(len(self.cache.table), dtype=np.int64))

    def pre_filter(self, pod: Pod) -> Status | None:
        return self.plugin.pre_filter(self.state, pod, self.batch())

    def filter(self, pod: Pod) -> dict[str, Status]:
        verdict = self.plugin.filter_batch(self.state, pod, self.batch())
        return {name: verdict.status_at(i) for i, name in enumerate(self.batch().names)}

    def find(self, pod: Pod) -> tuple[Status | None, dict[str, Status]]:
        """PreFilter, then (if it passed) Filter on every node."""
        pre = self.pre_filter(pod)
        if pre is not None and not pre.is_success():
            return pre, {}
        return pre, self.filter(pod)

    def pod_volumes(self, node: str) -> PodVolumes | None:
        return self.state.read("PreFilter" + NAME).pod_volumes.get(node)


def reasons_of(status: Status) -> set[str]:
    return set(status.reasons)


def bindings(pod_volumes: PodVolumes | None) -> list[tuple[str, str]]:
    assert pod_volumes is not None
    return [(b.pvc.name, b.pv.name) for b in pod_volumes.static_bindings]


def provisions(pod_volumes: PodVolumes | None) -> list[str]:
    assert pod_volumes is not None
    return [pvc.name for pvc in pod_volumes.dynamic_provisions]


# -- TestVolumeBinding (volume_binding_test.go) --------------------------------------------

WAIT_SC = StorageClass(name="wait-sc", volume_binding_mode=WAIT_FOR_FIRST_CONSUMER)
IMMEDIATE_SC = StorageClass(name="immediate-sc", volume_binding_mode=IMMEDIATE)


def vb_pvc(name: str, bound_pv: str, storage_class: str) -> PersistentVolumeClaim:
    """volume_binding_test.go's makePVC."""
    annotations = {ANN_BIND_COMPLETED: "true"} if bound_pv else {}
    return PersistentVolumeClaim(namespace="default", name=name, volume_name=bound_pv, storage_class=storage_class,
                                 annotations=annotations)


@pytest.mark.parametrize(
    ("pod_claims", "node_labels", "objects", "pre_filter", "filter_reasons"),
    [
        pytest.param((), {}, (), Status(Code.SKIP), None, id="pod has not pvcs"),
        pytest.param(("pvc-a",), {}, (vb_pvc("pvc-a", "pv-a", "wait-sc"), PersistentVolume(name="pv-a")),
                     None, [], id="all bound"),
        pytest.param(("pvc-a",), {}, (), Status(UNRESOLVABLE, ('persistentvolumeclaim "pvc-a" not found',)),
                     None, id="PVC does not exist"),
        pytest.param(("pvc-a", "pvc-b"), {}, (vb_pvc("pvc-a", "pv-a", "wait-sc"),),
                     Status(UNRESOLVABLE, ('persistentvolumeclaim "pvc-b" not found',)), None,
                     id="Part of PVCs do not exist"),
        pytest.param(("pvc-a",), {}, (vb_pvc("pvc-a", "", "immediate-sc"),),
                     Status(UNRESOLVABLE, (ERR_UNBOUND_IMMEDIATE,)), None, id="immediate claims not bound"),
        pytest.param(("pvc-a",), {}, (vb_pvc("pvc-a", "", "wait-sc"),), None, [ERR_REASON_BIND_CONFLICT],
                     id="unbound claims no matches"),
        pytest.param(("pvc-a", "pvc-b"), {"foo": "barbar"},
                     (vb_pvc("pvc-a", "pv-a", "wait-sc"), vb_pvc("pvc-b", "", "wait-sc"),
                      PersistentVolume(name="pv-a", node_affinity=node_affinity("foo", "bar"))),
                     None, [ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT], id="bound and unbound unsatisfied"),
        pytest.param(("pvc-a",), {}, (vb_pvc("pvc-a", "pv-a", "wait-sc"),), None, [ERR_REASON_PV_NOT_EXIST],
                     id="pv not found"),
    ],
)
def test_volume_binding(pod_claims, node_labels, objects, pre_filter, filter_reasons):
    env = Env([make_node("node", labels=node_labels)], (WAIT_SC, IMMEDIATE_SC, *objects), classes=False)
    pod = pod_with(pod_claims, name="pod-a", namespace="default")
    pre, statuses = env.find(pod)
    assert pre == pre_filter
    if filter_reasons is None:
        return
    status = statuses["node"]
    if not filter_reasons:
        assert status.is_success()
    else:
        assert status.code == UNRESOLVABLE
        assert list(status.reasons) == filter_reasons  # kube's order


# -- PreFilter (1.33-1.35 checks) ------------------------------------------------------------


def test_pre_filter_skips_pods_without_claims_without_lookups():
    env = Env([node1()])
    pod = make_pod("p", spec={"volumes": [{"name": "e", "emptyDir": {}}, {"name": "c", "configMap": {"name": "x"}}]})
    assert env.pre_filter(pod) == Status(Code.SKIP)
    assert env.plugin.reserve(env.state, pod, "node1") is None
    assert asyncio.run(env.plugin.pre_bind(env.state, pod, "node1")) is None


@pytest.mark.parametrize(
    ("claim", "ephemeral", "message"),
    [
        pytest.param(None, True, 'waiting for ephemeral volume controller to create the persistentvolumeclaim '
                     '"test-pod-eph"', id="ephemeral-missing"),
        pytest.param(attrs.evolve(bound_pvc, phase="Lost"), False,
                     'persistentvolumeclaim "bound-pvc" bound to non-existent persistentvolume "pv-bound"', id="lost"),
        pytest.param(attrs.evolve(bound_pvc, deleting=True), False,
                     'persistentvolumeclaim "bound-pvc" is being deleted', id="deleting"),
        pytest.param(attrs.evolve(bound_pvc, name="test-pod-eph"), True,
                     "PVC testns/test-pod-eph was not created for pod testns/test-pod (pod is not owner)",
                     id="ephemeral-not-owned"),
        pytest.param(attrs.evolve(bound_pvc, name="test-pod-eph", owner_references=(OwnerReference(
            kind="Pod", name="test-pod", uid="other", controller=True),)), True,
                     "PVC testns/test-pod-eph was not created for pod testns/test-pod (pod is not owner)",
                     id="ephemeral-other-owner"),
        pytest.param(attrs.evolve(bound_pvc, name="test-pod-eph", owner_references=(OwnerReference(
            kind="Pod", name="test-pod", uid="uid-testns-test-pod", controller=False),)), True,
                     "PVC testns/test-pod-eph was not created for pod testns/test-pod (pod is not owner)",
                     id="ephemeral-owner-not-controller"),
    ],
)
def test_pre_filter_claim_problems(claim, ephemeral, message):
    env = Env([node1()], (claim,) if claim is not None else ())
    pod = pod_with(() if ephemeral else (claim,), ephemeral=("eph",) if ephemeral else ())
    assert env.pre_filter(pod) == Status(UNRESOLVABLE, (message,))


def test_pre_filter_ephemeral_claim_owned_by_the_pod():
    owned = attrs.evolve(bound_pvc, name="test-pod-eph", owner_references=(
        OwnerReference(kind="Pod", name="test-pod", uid="uid-testns-test-pod", controller=True),))
    env = Env([node1()], (owned, pv_bound))
    pre, statuses = env.find(pod_with((), ephemeral=("eph",)))
    assert pre is None and statuses["node1"].is_success()


@pytest.mark.parametrize(
    ("claim", "immediate"),
    [
        (make_pvc("c", G, "", UNBOUND, "", "1", ""), True),  # no class
        (make_pvc("c", G, "", UNBOUND, "", "1", "missing-class"), True),  # class not found
        (make_pvc("c", G, "", PREBOUND, "pv-x", "1", WAIT), True),  # pre-bound, not bind-completed
        (make_pvc("c", G, "", UNBOUND, "", "1", WAIT), False),
    ],
)
def test_pre_filter_classification(claim, immediate):
    env = Env([node1()], (claim,))
    pre = env.pre_filter(pod_with((claim,)))
    assert (pre == Status(UNRESOLVABLE, (ERR_UNBOUND_IMMEDIATE,))) is immediate


def test_pre_filter_snapshots_pvs_of_delay_classes():
    env = Env([node1()], (unbound_pvc, pv_node1a))
    assert env.pre_filter(pod_with((unbound_pvc,))) is None
    claims = env.state.read("PreFilter" + NAME).claims
    assert claims.delay == (unbound_pvc,) and claims.pvs_by_class == {WAIT: (pv_node1a,)}
    # a PV added after PreFilter is not a candidate in this cycle
    env.cache.add_storage(make_pv("pv-late", "node1", 5 * G, "1", None, WAIT))
    env.filter(pod_with((unbound_pvc,)))
    assert bindings(env.pod_volumes("node1")) == [("unbound-pvc", "pv-node1a")]


# -- TestFindPodVolumesWithoutProvisioning -------------------------------------------------

FIND_WITHOUT_PROVISIONING = {
    "no-volumes": dict(pod=pod_with(())),
    "no-pvcs": dict(pod=make_pod("test-pod", namespace=NS, spec={"volumes": [{"name": "e", "emptyDir": {}}]})),
    "pvc-not-found": dict(cache_pvcs=(), pod_pvcs=(bound_pvc,), should_fail=True),
    "bound-pvc": dict(pod_pvcs=(bound_pvc,), pvs=(pv_bound,)),
    "bound-pvc,pv-not-exists": dict(pod_pvcs=(bound_pvc,), reasons={ERR_REASON_PV_NOT_EXIST}),
    "prebound-pvc": dict(pod_pvcs=(prebound_pvc,), pvs=(pv_node1a_bound,), should_fail=True),
    "unbound-pvc,pv-same-node": dict(pod_pvcs=(unbound_pvc,), pvs=(pv_node2, pv_node1a, pv_node1b),
                                     bindings=[("unbound-pvc", "pv-node1a")]),
    "unbound-pvc,pv-different-node": dict(pod_pvcs=(unbound_pvc,), pvs=(pv_node2,),
                                          reasons={ERR_REASON_BIND_CONFLICT}),
    "two-unbound-pvcs": dict(pod_pvcs=(unbound_pvc, unbound_pvc2), pvs=(pv_node1a, pv_node1b),
                             bindings=[("unbound-pvc", "pv-node1a"), ("unbound-pvc2", "pv-node1b")]),
    "two-unbound-pvcs,order-by-size": dict(pod_pvcs=(unbound_pvc2, unbound_pvc), pvs=(pv_node1a, pv_node1b),
                                           bindings=[("unbound-pvc", "pv-node1a"), ("unbound-pvc2", "pv-node1b")]),
    "two-unbound-pvcs,partial-match": dict(pod_pvcs=(unbound_pvc, unbound_pvc2), pvs=(pv_node1a,),
                                           reasons={ERR_REASON_BIND_CONFLICT}),
    "one-bound,one-unbound": dict(pod_pvcs=(unbound_pvc, bound_pvc), pvs=(pv_bound, pv_node1a),
                                  bindings=[("unbound-pvc", "pv-node1a")]),
    "one-bound,one-unbound,no-match": dict(pod_pvcs=(unbound_pvc, bound_pvc), pvs=(pv_bound, pv_node2),
                                           reasons={ERR_REASON_BIND_CONFLICT}),
    "one-prebound,one-unbound": dict(pod_pvcs=(unbound_pvc, prebound_pvc), pvs=(pv_node1a, pv_node1b),
                                     should_fail=True),
    "immediate-bound-pvc": dict(pod_pvcs=(immediate_bound_pvc,), pvs=(pv_bound_immediate,)),
    "immediate-bound-pvc-wrong-node": dict(pod_pvcs=(immediate_bound_pvc,), pvs=(pv_bound_immediate_node2,),
                                           reasons={ERR_REASON_NODE_CONFLICT}),
    "immediate-unbound-pvc": dict(pod_pvcs=(immediate_unbound_pvc,), should_fail=True),
    "immediate-unbound-pvc,delayed-mode-bound": dict(pod_pvcs=(immediate_unbound_pvc, bound_pvc), pvs=(pv_bound,),
                                                     should_fail=True),
    "immediate-unbound-pvc,delayed-mode-unbound": dict(pod_pvcs=(immediate_unbound_pvc, unbound_pvc),
                                                       should_fail=True),
}

CSI_DRIVERS = {
    "no CSIDriver": None,
    "CSIDriver with capacity tracking": CSIDriver(name=PROVISIONER, storage_capacity=True),
    "CSIDriver without capacity tracking": CSIDriver(name=PROVISIONER, storage_capacity=False),
}


def run_find_scenario(scenario: dict[str, Any], driver: CSIDriver | None, extra: Iterable[StorageObject] = ()):
    pod_pvcs = scenario.get("pod_pvcs", ())
    cache_pvcs = scenario.get("cache_pvcs", pod_pvcs)
    objects = [*scenario.get("pvs", ()), *cache_pvcs, *extra]
    if driver is not None:
        objects.append(driver)
    env = Env([node1()], objects)
    pod = scenario.get("pod") or pod_with(pod_pvcs)
    pre, statuses = env.find(pod)
    if scenario.get("should_fail"):
        assert pre is not None and pre.code == UNRESOLVABLE
        return env, None
    assert pre is None or pre.is_skip()
    if pre is not None:  # Skip: no claims, every node passes
        return env, Status()
    return env, statuses["node1"]


@pytest.mark.parametrize("driver", CSI_DRIVERS.values(), ids=CSI_DRIVERS.keys())
@pytest.mark.parametrize("name", FIND_WITHOUT_PROVISIONING)
def test_find_pod_volumes_without_provisioning(name, driver):
    scenario = FIND_WITHOUT_PROVISIONING[name]
    env, status = run_find_scenario(scenario, driver)
    if status is None:
        return
    reasons = scenario.get("reasons", set())
    assert reasons_of(status) == reasons
    if not reasons and "pod_pvcs" in scenario:
        assert bindings(env.pod_volumes("node1")) == scenario.get("bindings", [])
        assert provisions(env.pod_volumes("node1")) == []


# -- TestFindPodVolumesWithProvisioning ------------------------------------------------------

FIND_WITH_PROVISIONING = {
    "one-provisioned": dict(pod_pvcs=(provisioned_pvc,), provisions=["provisioned-pvc"], needs_capacity=True),
    "two-unbound-pvcs,one-matched,one-provisioned": dict(
        pod_pvcs=(unbound_pvc, provisioned_pvc), pvs=(pv_node1a,), bindings=[("unbound-pvc", "pv-node1a")],
        provisions=["provisioned-pvc"], needs_capacity=True),
    "one-bound,one-provisioned": dict(pod_pvcs=(bound_pvc, provisioned_pvc), pvs=(pv_bound,),
                                      provisions=["provisioned-pvc"], needs_capacity=True),
    "one-binding,one-selected-node": dict(pod_pvcs=(bound_pvc, selected_node_pvc), pvs=(pv_bound,),
                                          provisions=["provisioned-pvc"], needs_capacity=True),
    "immediate-unbound-pvc": dict(pod_pvcs=(immediate_unbound_pvc,), should_fail=True),
    "one-immediate-bound,one-provisioned": dict(pod_pvcs=(immediate_bound_pvc, provisioned_pvc),
                                                pvs=(pv_bound_immediate,), provisions=["provisioned-pvc"],
                                                needs_capacity=True),
    "invalid-provisioner": dict(pod_pvcs=(no_provisioner_pvc,), reasons={ERR_REASON_BIND_CONFLICT}),
    "volume-topology-unsatisfied": dict(pod_pvcs=(topo_mismatch_pvc,), reasons={ERR_REASON_BIND_CONFLICT}),
}


@pytest.mark.parametrize("driver", CSI_DRIVERS.values(), ids=CSI_DRIVERS.keys())
@pytest.mark.parametrize("name", FIND_WITH_PROVISIONING)
def test_find_pod_volumes_with_provisioning(name, driver):
    """The capacity check is always on (GA since 1.24): a CSIDriver with storageCapacity and no
    CSIStorageCapacity blocks provisioning."""
    scenario = FIND_WITH_PROVISIONING[name]
    env, status = run_find_scenario(scenario, driver)
    if status is None:
        return
    reasons = set(scenario.get("reasons", set()))
    if scenario.get("needs_capacity") and driver is not None and driver.storage_capacity:
        reasons.add(ERR_REASON_NOT_ENOUGH_SPACE)
    assert reasons_of(status) == reasons
    if not reasons:
        assert bindings(env.pod_volumes("node1")) == scenario.get("bindings", [])
        assert provisions(env.pod_volumes("node1")) == scenario.get("provisions", [])
    else:
        assert env.pod_volumes("node1") is None


# -- TestFindPodVolumesWithCSIMigration ----------------------------------------------------------

@pytest.mark.parametrize(
    ("zone", "csi_node", "reasons"),
    [
        pytest.param("us-east-1", csi_node1_migrated, set(), id="pvc-bound"),
        pytest.param("us-east-1", csi_node1_not_migrated, set(), id="pvc-bound,csinode-not-migrated"),
        pytest.param("us-east-1", None, set(), id="pvc-bound,missing-csinode"),
        pytest.param("us-east-2", csi_node1_migrated, {ERR_REASON_NODE_CONFLICT}, id="pvc-bound,node-different-zone"),
    ],
)
def test_find_pod_volumes_with_csi_migration(zone, csi_node, reasons):
    objects = [bound_migration_pvc, migration_pv_bound, *([csi_node] if csi_node else [])]
    env = Env([make_node("node1", labels={"topology.gke.io/zone": zone})], objects)
    pre, statuses = env.find(pod_with((bound_migration_pvc,)))
    assert pre is None
    assert reasons_of(statuses["node1"]) == reasons


def test_translated_affinity():
    gce = migration_pv_bound
    assert translated_affinity(gce) == node_affinity("topology.gke.io/zone", "us-east-1")
    # a zone key in the node affinity is renamed, a beta region key becomes GA
    affinity = NodeSelector(terms=(NodeSelectorTerm(match_expressions=(
        NodeSelectorRequirement(key="failure-domain.beta.kubernetes.io/zone", operator="In", values=("a", "b")),
        NodeSelectorRequirement(key="failure-domain.beta.kubernetes.io/region", operator="In", values=("r",)),
    )),))
    ebs = attrs.evolve(gce, in_tree="kubernetes.io/aws-ebs", in_tree_handle="vol-1", labels={}, node_affinity=affinity)
    assert translated_affinity(ebs) == NodeSelector(terms=(NodeSelectorTerm(match_expressions=(
        NodeSelectorRequirement(key="topology.ebs.csi.aws.com/zone", operator="In", values=("a", "b")),
        NodeSelectorRequirement(key="topology.kubernetes.io/region", operator="In", values=("r",)),
    )),))
    # several zones in the label, added to every term
    multi = attrs.evolve(gce, labels={"topology.kubernetes.io/zone": "z2__z1"}, node_affinity=node_affinity("k", "v"))
    assert translated_affinity(multi) == NodeSelector(terms=(NodeSelectorTerm(match_expressions=(
        NodeSelectorRequirement(key="k", operator="In", values=("v",)),
        NodeSelectorRequirement(key="topology.gke.io/zone", operator="In", values=("z1", "z2")),
    )),))
    azure = attrs.evolve(gce, in_tree="kubernetes.io/azure-disk")
    assert translated_affinity(azure) is None


def test_bound_migrated_pv_with_invalid_ebs_id_is_an_error_on_migrated_nodes():
    pv = attrs.evolve(migration_pv_bound, in_tree="kubernetes.io/aws-ebs", in_tree_handle="aws://zone/bad")
    csi = CSINode(name="node1", annotations={ANN_MIGRATED_PLUGINS: "kubernetes.io/aws-ebs"})
    env = Env([node1(), make_node("node2")], (bound_migration_pvc, pv, csi))
    _, statuses = env.find(pod_with((bound_migration_pvc,)))
    assert statuses["node1"].code == Code.ERROR
    assert statuses["node1"].reasons[0].startswith("could not translate pv: ")
    assert statuses["node2"].is_success()


# -- TestCapacity ----------------------------------------------------------------------------------


def capacity(name: str, storage_class: str, node: str | None, size: int | None,
             maximum: int | None = None) -> CSIStorageCapacity:
    topology = LabelSelector(match_labels={NODE_KEY: node} if node else {})
    return CSIStorageCapacity(namespace=NS, name=name, storage_class_name=storage_class, node_topology=topology,
                              capacity=size, maximum_volume_size=maximum)


@pytest.mark.parametrize(
    ("capacities", "reasons"),
    [
        pytest.param((capacity("net", WAIT_PROVISIONER, None, GI),), set(), id="network-attached"),
        pytest.param((capacity("net", WAIT_PROVISIONER, "node1", GI),), set(), id="local-storage"),
        pytest.param((capacity("net", WAIT_PROVISIONER, None, GI), capacity("net2", WAIT_PROVISIONER, "node2", GI),
                      capacity("net3", WAIT_PROVISIONER, "node1", GI)), set(), id="multiple"),
        pytest.param((), {ERR_REASON_NOT_ENOUGH_SPACE}, id="no-storage"),
        pytest.param((capacity("net", WAIT_PROVISIONER, "node2", GI),), {ERR_REASON_NOT_ENOUGH_SPACE},
                     id="wrong-node"),
        pytest.param((capacity("net", WAIT, "node1", GI),), {ERR_REASON_NOT_ENOUGH_SPACE}, id="wrong-storage-class"),
        pytest.param((capacity("net", WAIT_PROVISIONER, "node1", MI),), {ERR_REASON_NOT_ENOUGH_SPACE},
                     id="insufficient-storage"),
        pytest.param((capacity("net", WAIT_PROVISIONER, "node1", 0),), {ERR_REASON_NOT_ENOUGH_SPACE},
                     id="zero-storage"),
        pytest.param((capacity("net", WAIT_PROVISIONER, "node1", None),), {ERR_REASON_NOT_ENOUGH_SPACE},
                     id="nil-storage"),
        # 1.21+: maximumVolumeSize wins over capacity
        pytest.param((capacity("net", WAIT_PROVISIONER, "node1", 10 * GI, maximum=MI),),
                     {ERR_REASON_NOT_ENOUGH_SPACE}, id="maximum-volume-size-too-small"),
        pytest.param((capacity("net", WAIT_PROVISIONER, "node1", MI, maximum=GI),), set(),
                     id="maximum-volume-size-enough"),
        pytest.param((attrs.evolve(capacity("net", WAIT_PROVISIONER, "node1", GI), node_topology=None),),
                     {ERR_REASON_NOT_ENOUGH_SPACE}, id="nil-node-topology"),
    ],
)
def test_capacity(capacities, reasons):
    driver = CSIDriver(name=PROVISIONER, storage_capacity=True)
    env = Env([node1()], (provisioned_pvc, driver, *capacities))
    _, statuses = env.find(pod_with((provisioned_pvc,)))
    status = statuses["node1"]
    assert reasons_of(status) == reasons
    if reasons:
        assert status.code == UNRESOLVABLE
        assert env.pod_volumes("node1") is None  # (no bound claim conflict, no bind conflict)
    else:
        assert provisions(env.pod_volumes("node1")) == ["provisioned-pvc"]


def test_claim_without_storage_request_needs_no_capacity():
    driver = CSIDriver(name=PROVISIONER, storage_capacity=True)
    claim = attrs.evolve(provisioned_pvc, request=None)
    env = Env([node1()], (claim, driver))
    _, statuses = env.find(pod_with((claim,)))
    assert statuses["node1"].is_success()


# -- Filter over many nodes --------------------------------------------------------------------------


def test_filter_over_nodes_all_reasons_in_kube_order():
    """bound PV for node1 only; a WaitForFirstConsumer claim provisionable by a class limited to
    node1/node3 with capacity on node3 only."""
    sc = StorageClass(name="local", volume_binding_mode=WAIT_FOR_FIRST_CONSUMER, provisioner=PROVISIONER,
                      allowed_topologies=(TopologySelectorTerm(match_label_expressions=(
                          (NODE_KEY, ("node1", "node3")),)),))
    claim = make_pvc("data", GI, "", UNBOUND, "", "1", "local")
    objects = (bound_pvc, pv_bound, claim, sc, CSIDriver(name=PROVISIONER, storage_capacity=True),
               capacity("c3", "local", "node3", GI))
    nodes = [make_node(f"node{i}", labels={NODE_KEY: f"node{i}"}) for i in (1, 2, 3)]
    env = Env(nodes, objects)
    _, statuses = env.find(pod_with((bound_pvc, claim)))
    assert list(statuses["node1"].reasons) == [ERR_REASON_NOT_ENOUGH_SPACE]
    assert list(statuses["node2"].reasons) == [ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT]
    assert list(statuses["node3"].reasons) == [ERR_REASON_NODE_CONFLICT]
    assert all(s.code == UNRESOLVABLE for s in statuses.values())


def test_local_pvs_each_node_gets_its_own_smallest_pv():
    """Static selection per node: each candidate PV's affinity is evaluated once over the batch;
    the smallest fitting PV of each node wins, and two claims never share one."""
    nodes = [make_node(f"n{i}", labels={NODE_KEY: f"n{i}"}) for i in range(6)]
    pvs = []
    for i in range(5):  # n5 has no PV; n0..n4 have a 5G and (n0..n2) a 10G PV
        pvs.append(make_pv(f"pv-{i}-small", f"n{i}", 5 * G, "1", None, WAIT))
        if i < 3:
            pvs.append(make_pv(f"pv-{i}-big", f"n{i}", 10 * G, "1", None, WAIT))
    claim_a = make_pvc("a", 5 * G, "", UNBOUND, "", "1", WAIT)
    claim_b = make_pvc("b", 1 * G, "", UNBOUND, "", "1", WAIT)
    env = Env(nodes, (*pvs, claim_a, claim_b))
    _, statuses = env.find(pod_with((claim_a, claim_b)))
    for i in range(3):  # b (smaller request) first takes the small PV, a the big one
        assert statuses[f"n{i}"].is_success()
        assert bindings(env.pod_volumes(f"n{i}")) == [("b", f"pv-{i}-small"), ("a", f"pv-{i}-big")]
    for i in (3, 4, 5):
        assert list(statuses[f"n{i}"].reasons) == [ERR_REASON_BIND_CONFLICT]


def test_pre_bound_pv_decides_even_when_a_smaller_pv_matches():
    """FindMatchingVolume returns a PV whose claimRef names the claim (if its affinity matches the
    node), else no match, whatever the other PVs."""
    claim = make_pvc("c", 1 * G, "", UNBOUND, "", "1", WAIT)
    small = make_pv("pv-small", "", 1 * G, "1", None, WAIT)
    pre_bound = make_pv("pv-pre", "node1", 10 * G, "1", claim, WAIT)
    env = Env([node1(), make_node("node2", labels={NODE_KEY: "node2"})], (claim, small, pre_bound))
    _, statuses = env.find(pod_with((claim,)))
    assert bindings(env.pod_volumes("node1")) == [("c", "pv-pre")]
    assert list(statuses["node2"].reasons) == [ERR_REASON_BIND_CONFLICT]  # waitClass cannot provision


@pytest.mark.parametrize(
    ("change", "matches"),
    [
        ({}, True),
        ({"claim_ref": ClaimRef(namespace=NS, name="other")}, False),
        ({"capacity": G // 2}, False),
        ({"volume_mode": "Block"}, False),
        ({"volume_attributes_class": "gold"}, False),
        ({"deleting": True}, False),
        ({"phase": "Released"}, False),
        ({"storage_class": "other"}, False),
        ({"access_modes": ()}, False),
        ({"labels": {"tier": "fast"}}, True),
    ],
)
def test_static_selection_rules(change, matches):
    claim = make_pvc("c", G, "", UNBOUND, "", "1", WAIT, access_modes=("ReadWriteOnce",),
                     selector=LabelSelector(match_labels={"tier": "fast"}))
    pv = make_pv("pv", "node1", G, "1", None, WAIT, access_modes=("ReadWriteOnce", "ReadOnlyMany"),
                 labels={"tier": "fast"})
    pv = attrs.evolve(pv, **change)
    env = Env([node1()], (claim, pv), classes=True)
    env.cache.add_storage(attrs.evolve(CLASSES[2]))
    _, statuses = env.find(pod_with((claim,)))
    assert statuses["node1"].is_success() is matches


def test_selected_node_fast_path():
    claim = with_selected_node(provisioned_pvc, "node2")
    nodes = [node1(), make_node("node2", labels={NODE_KEY: "node1"})]  # node2 passes allowedTopologies too
    env = Env(nodes, (claim,))
    _, statuses = env.find(pod_with((claim,)))
    assert list(statuses["node1"].reasons) == [ERR_REASON_BIND_CONFLICT]
    assert statuses["node2"].is_success() and provisions(env.pod_volumes("node2")) == ["provisioned-pvc"]


def test_all_bound_pod_without_node_affinity_passes_every_node():
    pv = attrs.evolve(pv_bound, node_affinity=None)
    env = Env([make_node(f"n{i}") for i in range(50)], (bound_pvc, pv))
    _, statuses = env.find(pod_with((bound_pvc,)))
    assert all(s.is_success() for s in statuses.values())
    assert env.pod_volumes("n7") == PodVolumes()


def test_filter_without_pre_filter_state_is_an_error():
    env = Env([node1()])
    statuses = env.filter(pod_with((bound_pvc,)))
    assert statuses["node1"].code == Code.ERROR


# -- TestAssumePodVolumes / TestRevertAssumedPodVolumes / TestFindAssumeVolumes ------------------------


def assumed_pv(pv: PersistentVolume, claim: PersistentVolumeClaim) -> PersistentVolume:
    return make_pv(pv.name, "node1", pv.capacity, pv.resource_version, claim, pv.storage_class)


@pytest.mark.parametrize(
    ("pod_pvcs", "pvs", "static", "provisioned", "should_fail", "all_bound", "expected_pvs", "expected_pvcs"),
    [
        pytest.param((bound_pvc,), (pv_bound,), (), (), False, True, None, None, id="all-bound"),
        pytest.param((unbound_pvc,), (pv_node1a,), ((unbound_pvc, pv_node1a),), (), False, False,
                     (pv_node1a_bound,), (), id="one-binding"),
        pytest.param((unbound_pvc, unbound_pvc2), (pv_node1a, pv_node1b),
                     ((unbound_pvc, pv_node1a), (unbound_pvc2, pv_node1b)), (), False, False,
                     (pv_node1a_bound, pv_node1b_bound), (), id="two-bindings"),
        pytest.param((unbound_pvc,), (pv_node1a_bound,), ((unbound_pvc, pv_node1a_bound),), (), False, False,
                     (pv_node1a_bound,), (), id="pv-already-bound"),
        pytest.param((unbound_pvc,), (pv_node1a,), ((unbound_pvc, pv_node1a), (unbound_pvc2, pv_node1b)), (),
                     True, False, None, None, id="tmpupdate-failed"),
        pytest.param((unbound_pvc, provisioned_pvc), (pv_node1a,), ((unbound_pvc, pv_node1a),), (provisioned_pvc,),
                     False, False, (pv_node1a_bound,), (selected_node_pvc,), id="one-binding, one-pvc-provisioned"),
        pytest.param((unbound_pvc, provisioned_pvc_higher), (pv_node1a,), ((unbound_pvc, pv_node1a),),
                     (provisioned_pvc2,), True, False, None, None, id="one-binding, one-provision-tmpupdate-failed"),
    ],
)
def test_assume_pod_volumes(pod_pvcs, pvs, static, provisioned, should_fail, all_bound, expected_pvs,
                            expected_pvcs):
    env = Env([node1()], (*pod_pvcs, *pvs))
    pod = pod_with(pod_pvcs)
    pod_volumes = PodVolumes(tuple(StaticBinding(c, v) for c, v in static), tuple(provisioned))
    if should_fail:
        with pytest.raises(AssumeError):
            assume_pod_volumes(pod, "node1", pod_volumes, env.volumes)
        for _, pv in static:  # restored
            assert not env.volumes.is_assumed_pv(pv.name)
        for pvc in provisioned:
            assert not env.volumes.is_assumed_pvc(pvc.key)
        return
    got_all_bound, assumed = assume_pod_volumes(pod, "node1", pod_volumes, env.volumes)
    assert got_all_bound is all_bound
    if all_bound:
        assert assumed == pod_volumes
        return
    assert [b.pv for b in assumed.static_bindings] == list(expected_pvs)
    assert list(assumed.dynamic_provisions) == list(expected_pvcs)
    for pv in expected_pvs:
        assert env.volumes.pv(pv.name) == pv
    for pvc in expected_pvcs:
        assert env.volumes.pvc(pvc.key) == pvc


def test_revert_assumed_pod_volumes():
    env = Env([node1()], (unbound_pvc, provisioned_pvc, pv_node1a))
    pod = pod_with((unbound_pvc, provisioned_pvc))
    pod_volumes = PodVolumes((StaticBinding(unbound_pvc, pv_node1a),), (provisioned_pvc,))
    all_bound, assumed = assume_pod_volumes(pod, "node1", pod_volumes, env.volumes)
    assert not all_bound
    assert env.volumes.pv("pv-node1a") == pv_node1a_bound
    assert env.volumes.pvc(provisioned_pvc.key) == selected_node_pvc
    revert_pod_volumes(assumed, env.volumes)
    assert env.volumes.pv("pv-node1a") == pv_node1a
    assert env.volumes.pvc(provisioned_pvc.key) == provisioned_pvc
    revert_pod_volumes(assumed, env.volumes)  # idempotent


def test_find_assume_volumes():
    """After Reserve assumed a PV for the claim, the next cycles choose the same PV."""
    env = Env([node1()], (unbound_pvc, pv_node2, pv_node1a, pv_node1c))
    pod = pod_with((unbound_pvc,))
    _, statuses = env.find(pod)
    assert statuses["node1"].is_success()
    first = bindings(env.pod_volumes("node1"))
    assert env.plugin.reserve(env.state, pod, "node1") is None
    for _ in range(5):
        env.state = CycleState()
        _, statuses = env.find(pod)
        assert statuses["node1"].is_success()
        assert bindings(env.pod_volumes("node1")) == first


def test_reserve_and_unreserve_through_the_plugin():
    env = Env([node1(), make_node("node2", labels={NODE_KEY: "node2"})], (unbound_pvc, pv_node1a))
    pod = pod_with((unbound_pvc,))
    env.find(pod)
    assert env.plugin.reserve(env.state, pod, "node1") is None
    assert env.volumes.pv("pv-node1a") == pv_node1a_bound
    # another pod's claim no longer sees the PV as available
    other = make_pvc("other", G, "", UNBOUND, "", "1", WAIT)
    env.cache.add_storage(other)
    env2 = CycleState()
    env.plugin.pre_filter(env2, pod_with((other,), name="p2"), env.batch())
    verdict = env.plugin.filter_batch(env2, pod_with((other,), name="p2"), env.batch())
    assert list(verdict.status_at(0).reasons) == [ERR_REASON_BIND_CONFLICT]
    env.plugin.unreserve(env.state, pod, "node1")
    assert env.volumes.pv("pv-node1a") == pv_node1a
    env.plugin.unreserve(env.state, pod, "node1")


def test_reserve_error_when_assume_fails():
    env = Env([node1()], (unbound_pvc, pv_node1a))
    pod = pod_with((unbound_pvc,))
    env.find(pod)
    env.cache.add_storage(attrs.evolve(pv_node1a, resource_version="5"))  # newer than the chosen copy
    status = env.plugin.reserve(env.state, pod, "node1")
    assert status is not None and status.code == Code.ERROR
    assert "out of sync" in status.message()


# -- TestCheckBindings -----------------------------------------------------------------------------


def run_check(env: Env, pod_volumes: PodVolumes, node: str = "node1", pod_exists: bool = True) -> bool:
    return check_bindings(pod_with(()), node, pod_volumes, env.volumes, env.cache.node(node), pod_exists)


CHECK_BINDINGS = {
    "nothing-to-bind": dict(static=(), provisioned=(), bound=True),
    "binding-bound": dict(static=((unbound_pvc, pv_node1a_bound),), init_pvs=(pv_node1a_bound,),
                          init_pvcs=(bound_pvc_node1a,), bound=True),
    "binding-prebound": dict(static=((unbound_pvc, pv_node1a_bound),), init_pvs=(pv_node1a_bound,),
                             init_pvcs=(prebound_pvc_node1a,)),
    "binding-unbound": dict(static=((unbound_pvc, pv_node1a_bound),), init_pvs=(pv_node1a_bound,),
                            init_pvcs=(unbound_pvc,)),
    "binding-pvc-not-exists": dict(static=((unbound_pvc, pv_node1a_bound),), init_pvs=(pv_node1a_bound,),
                                   fail='failed to check binding: could not find v1.PersistentVolumeClaim '
                                        '"testns/unbound-pvc"'),
    "binding-pv-not-exists": dict(static=((unbound_pvc, pv_node1a_bound),), init_pvs=(pv_node1a_bound,),
                                  init_pvcs=(bound_pvc_node1a,), delete_pvs=True,
                                  fail='failed to check binding: could not find v1.PersistentVolume "pv-node1a"'),
    "binding-claimref-nil": dict(static=((unbound_pvc, pv_node1a_bound),), init_pvs=(pv_node1a,),
                                 init_pvcs=(bound_pvc_node1a,), fail='ClaimRef got reset for pv "pv-node1a"'),
    "binding-claimref-uid-empty": dict(static=((unbound_pvc, pv_node1a_bound),),
                                       init_pvs=(without_claim_uid(pv_node1a_bound),),
                                       init_pvcs=(bound_pvc_node1a,), fail='ClaimRef got reset for pv "pv-node1a"'),
    "binding-one-bound,one-unbound": dict(static=((unbound_pvc, pv_node1a_bound), (unbound_pvc2, pv_node1b_bound)),
                                          init_pvs=(pv_node1a_bound, pv_node1b_bound),
                                          init_pvcs=(bound_pvc_node1a, unbound_pvc2)),
    "provisioning-pvc-bound": dict(provisioned=(with_selected_node(provisioned_pvc, "node1"),), init_pvs=(pv_bound,),
                                   init_pvcs=(with_selected_node(provisioned_pvc_bound, "node1"),), bound=True),
    "provisioning-pvc-unbound": dict(provisioned=(with_selected_node(provisioned_pvc, "node1"),),
                                     init_pvcs=(with_selected_node(provisioned_pvc, "node1"),)),
    "provisioning-pvc-not-exists": dict(provisioned=(with_selected_node(provisioned_pvc, "node1"),),
                                        fail='failed to check provisioning pvc: could not find '
                                             'v1.PersistentVolumeClaim "testns/provisioned-pvc"'),
    "provisioning-pvc-annotations-nil": dict(provisioned=(with_selected_node(provisioned_pvc, "node1"),),
                                             init_pvcs=(provisioned_pvc,),
                                             fail='selectedNode annotation reset for PVC "provisioned-pvc"'),
    "provisioning-pvc-selected-node-dropped": dict(
        provisioned=(with_selected_node(provisioned_pvc, "node1"),),
        init_pvcs=(without_annotations(provisioned_pvc),),
        fail='selectedNode annotation reset for PVC "provisioned-pvc"'),
    "provisioning-pvc-selected-node-wrong-node": dict(
        provisioned=(with_selected_node(provisioned_pvc, "node1"),),
        init_pvcs=(with_selected_node(provisioned_pvc, "wrong-node"),),
        fail='provisioning failed for PVC "provisioned-pvc"'),
    "binding-bound-provisioning-unbound": dict(
        static=((unbound_pvc, pv_node1a_bound),), provisioned=(with_selected_node(provisioned_pvc, "node1"),),
        init_pvs=(pv_node1a_bound,), init_pvcs=(bound_pvc_node1a, with_selected_node(provisioned_pvc, "node1"))),
    "tolerate-provisioning-pvc-bound-pv-not-found": dict(
        provisioned=(with_selected_node(provisioned_pvc, "node1"),),
        init_pvcs=(with_selected_node(provisioned_pvc_bound, "node1"),)),
    "binding-pv-older-than-written": dict(static=((unbound_pvc, attrs.evolve(pv_node1a_bound, resource_version="2")),),
                                          init_pvs=(pv_node1a_bound,), init_pvcs=(bound_pvc_node1a,)),
    "binding-pv-node-affinity-changed": dict(
        static=((unbound_pvc, pv_node1a_bound),),
        init_pvs=(attrs.evolve(pv_node1a_bound, node_affinity=node_affinity(NODE_KEY, "node2")),),
        init_pvcs=(bound_pvc_node1a,),
        fail='pv "pv-node1a" node affinity doesn\'t match node "node1": no matching NodeSelectorTerms'),
}


@pytest.mark.parametrize("name", CHECK_BINDINGS)
def test_check_bindings(name):
    scenario = CHECK_BINDINGS[name]
    objects = [] if scenario.get("delete_pvs") else list(scenario.get("init_pvs", ()))
    env = Env([node1()], (*objects, *scenario.get("init_pvcs", ())))
    pod_volumes = PodVolumes(tuple(StaticBinding(c, v) for c, v in scenario.get("static", ())),
                             tuple(scenario.get("provisioned", ())))
    if "fail" in scenario:
        with pytest.raises(BinderError) as info:
            run_check(env, pod_volumes)
        assert str(info.value) == scenario["fail"]
    else:
        assert run_check(env, pod_volumes) is scenario.get("bound", False)


def test_check_bindings_node_and_pod_gone():
    env = Env([node1()])
    with pytest.raises(BinderError, match='^failed to get node "node9": node "node9" not found$'):
        run_check(env, PodVolumes(), node="node9")
    with pytest.raises(BinderError, match='^pod does not exist any more: pod "test-pod" not found$'):
        run_check(env, PodVolumes(), pod_exists=False)


@pytest.mark.parametrize(
    ("static", "provisioned", "init_pvs", "init_pvcs", "zone", "bound", "fail"),
    [
        pytest.param((), (with_selected_node(prov_migration_pvc_bound, "node1"),), (migration_pv_bound,),
                     (with_selected_node(prov_migration_pvc_bound, "node1"),), "us-east-1", True, False,
                     id="provisioning-pvc-bound"),
        pytest.param(((unbound_pvc, migration_pv_bound_to_unbound),), (), (migration_pv_bound_to_unbound,),
                     (unbound_pvc,), "us-east-1", False, False, id="binding-node-pv-same-zone"),
        pytest.param(((unbound_pvc, migration_pv_bound_to_unbound),), (), (migration_pv_bound_to_unbound,),
                     (unbound_pvc,), "us-east-2", False, True, id="binding-node-pv-different-zone"),
    ],
)
def test_check_bindings_with_csi_migration(static, provisioned, init_pvs, init_pvcs, zone, bound, fail):
    env = Env([make_node("node1", labels={"topology.gke.io/zone": zone})],
              (*init_pvs, *init_pvcs, csi_node1_migrated))
    pod_volumes = PodVolumes(tuple(StaticBinding(c, v) for c, v in static), tuple(provisioned))
    if fail:
        with pytest.raises(BinderError, match="node affinity doesn't match"):
            run_check(env, pod_volumes)
    else:
        assert run_check(env, pod_volumes) is bound


# -- PreBind: TestBindAPIUpdate / TestBindPodVolumes -------------------------------------------------


class Conflict(ScorerError):
    """The fake cluster's refusal of a stale or missing object."""


class FakeWriter:
    """A VolumeWriter over the cache: PUT with a resourceVersion precondition, the stored object
    delivered to the cache at once; ``controller`` (the PV controller) runs after each write."""

    def __init__(self, cache: Any, controller: Callable[[Any], None] | None = None) -> None:
        self.cache = cache
        self.controller = controller
        self.calls: list[tuple[str, str]] = []

    def _stored(self, obj: Any, current: Any) -> Any:
        if current is None or current.resource_version != obj.resource_version:
            kind = "persistentvolumes" if isinstance(obj, PersistentVolume) else "persistentvolumeclaims"
            raise Conflict(f'Operation cannot be fulfilled on {kind} "{obj.name}": the object has been modified; '
                           "please apply your changes to the latest version and try again")
        stored = attrs.evolve(obj, resource_version=str(int(obj.resource_version or 0) + 1))
        self.cache.add_storage(stored)
        if self.controller is not None:
            self.controller(self.cache)
        return stored

    async def update_persistent_volume(self, pv: PersistentVolume) -> PersistentVolume:
        self.calls.append(("pv", pv.name))
        return self._stored(pv, self.cache.volumes.api_pv(pv.name))

    async def update_persistent_volume_claim(self, pvc: PersistentVolumeClaim) -> PersistentVolumeClaim:
        self.calls.append(("pvc", pvc.name))
        return self._stored(pvc, self.cache.volumes.api_pvc(pvc.key))


def bump(obj: Any, **changes: Any) -> Any:
    return attrs.evolve(obj, resource_version=str(int(obj.resource_version or 0) + 1), **changes)


def pv_controller(cache: Any) -> None:
    """The PV controller's bind (reference §10.6.10): a PV whose claimRef has a UID binds its
    claim; a claim with a selected node gets a provisioned PV on that node, then is bound."""
    volumes = cache.volumes
    for pvc in list(volumes.pvcs.values()):
        if pvc.volume_name or ANN_SELECTED_NODE not in pvc.annotations:
            continue
        name = f"pvc-{pvc.name}"
        if volumes.api_pv(name) is None:
            cache.add_storage(make_pv(name, pvc.annotations[ANN_SELECTED_NODE], pvc.request or 0, "1", pvc,
                                      pvc.storage_class))
    for pv in list(volumes.pvs.values()):
        ref = pv.claim_ref
        if ref is None or not ref.uid:
            continue
        pvc = volumes.api_pvc(ref.key)
        if pvc is None or pvc.fully_bound:
            continue
        cache.add_storage(bump(pvc, volume_name=pv.name, annotations={**pvc.annotations, ANN_BIND_COMPLETED: "yes"}))
        if pv.phase != "Bound":
            cache.add_storage(bump(pv, phase="Bound"))


class FakeTime:
    """PreBind's clock and sleep; ``at`` runs a callback when the clock passes a time."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.events: list[tuple[float, Callable[[], None]]] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        for when, action in [e for e in self.events if e[0] <= self.now]:
            self.events.remove((when, action))
            action()

    def at(self, when: float, action: Callable[[], None]) -> None:
        self.events.append((when, action))


def prebind_env(objects: Iterable[StorageObject], *, controller: Callable[[Any], None] | None = pv_controller,
                timeout: int = 600, nodes: Iterable[Any] = ()) -> tuple[Env, FakeWriter, FakeTime]:
    env = Env(list(nodes) or [node1()], objects, timeout=timeout)
    writer = FakeWriter(env.cache, controller)
    env.plugin.handle.binder = writer
    fake = FakeTime()
    env.plugin.clock, env.plugin.sleep = fake.clock, fake.sleep
    return env, writer, fake


def schedule_and_reserve(env: Env, pod: Pod, node: str = "node1") -> None:
    pre, statuses = env.find(pod)
    assert pre is None and statuses[node].is_success(), statuses.get(node, pre)
    assert env.plugin.reserve(env.state, pod, node) is None
    env.cache.assume(pod, node)


def test_pre_bind_static_binding_bound_at_once():
    env, writer, fake = prebind_env((unbound_pvc, pv_node1a))
    pod = pod_with((unbound_pvc,))
    schedule_and_reserve(env, pod)
    assert asyncio.run(env.plugin.pre_bind(env.state, pod, "node1")) is None
    assert writer.calls == [("pv", "pv-node1a")]
    assert fake.sleeps == []  # checked at once
    assert env.volumes.api_pvc(unbound_pvc.key).volume_name == "pv-node1a"
    assert not env.volumes.is_assumed_pv("pv-node1a")  # the delivered version superseded it


def test_pre_bind_provisioning_succeeds_after_time():
    """TestBindPodVolumes binding-dynamic-pv-succeeds-after-time: the provisioner acts after 5 s."""
    env, writer, fake = prebind_env((provisioned_pvc,), controller=None)
    pod = pod_with((provisioned_pvc,))
    schedule_and_reserve(env, pod)
    fake.at(5.0, lambda: pv_controller(env.cache))
    assert asyncio.run(env.plugin.pre_bind(env.state, pod, "node1")) is None
    assert writer.calls == [("pvc", "provisioned-pvc")]
    assert fake.sleeps == [1.0] * 5
    assert env.volumes.api_pvc(provisioned_pvc.key).annotations[ANN_SELECTED_NODE] == "node1"


def test_pre_bind_looks_again_as_soon_as_a_storage_object_changes(monkeypatch):
    """With the real wait, PreBind does not sleep out its interval: the controller's write (delivered to the
    cache) wakes it. The interval is made an hour, so only the change can end the wait in time."""
    from scorer.plugins.volumebinding import plugin as plugin_module

    monkeypatch.setattr(plugin_module, "POLL_INTERVAL_SECONDS", 3600.0)
    env, writer, _ = prebind_env((provisioned_pvc,), controller=None)
    env.plugin.sleep = env.plugin._until_changed  # the real wait, not the fake clock's
    pod = pod_with((provisioned_pvc,))
    schedule_and_reserve(env, pod)

    async def bind_later() -> Status | None:
        asyncio.get_running_loop().call_later(0.05, pv_controller, env.cache)
        return await asyncio.wait_for(env.plugin.pre_bind(env.state, pod, "node1"), 30)

    assert asyncio.run(bind_later()) is None
    assert env.volumes.api_pvc(provisioned_pvc.key).fully_bound


def test_pre_bind_static_and_provisioned_pvs_first():
    env, writer, _ = prebind_env((unbound_pvc, provisioned_pvc, pv_node1a))
    pod = pod_with((unbound_pvc, provisioned_pvc))
    schedule_and_reserve(env, pod)
    assert asyncio.run(env.plugin.pre_bind(env.state, pod, "node1")) is None
    assert writer.calls == [("pv", "pv-node1a"), ("pvc", "provisioned-pvc")]


def test_pre_bind_all_bound_writes_nothing():
    env, writer, _ = prebind_env((bound_pvc, pv_bound))
    pod = pod_with((bound_pvc,))
    schedule_and_reserve(env, pod)
    assert asyncio.run(env.plugin.pre_bind(env.state, pod, "node1")) is None
    assert writer.calls == []


def test_pre_bind_conflict_restores_what_was_not_written():
    """TestBindAPIUpdate api-update-failed / binding-succeed,provision-api-update-failed: the
    second write conflicts; the first stays written (and assumed), the others are restored."""
    env, writer, _ = prebind_env((unbound_pvc, provisioned_pvc, provisioned_pvc2, pv_node1a), controller=None)
    pod = pod_with((unbound_pvc, provisioned_pvc, provisioned_pvc2))
    schedule_and_reserve(env, pod)
    env.cache.add_storage(provisioned_pvc_higher)  # changed behind the scheduler's back
    assert env.volumes.is_assumed_pvc(provisioned_pvc.key)
    status = asyncio.run(env.plugin.pre_bind(env.state, pod, "node1"))
    assert status is not None and status.code == Code.ERROR
    assert status.message().startswith('Operation cannot be fulfilled on persistentvolumeclaims "provisioned-pvc2"')
    assert writer.calls == [("pv", "pv-node1a"), ("pvc", "provisioned-pvc"), ("pvc", "provisioned-pvc2")]
    assert env.volumes.api_pv("pv-node1a").claim_ref is not None  # written, not rolled back
    assert env.volumes.api_pvc(provisioned_pvc.key).selected_node == "node1"
    assert env.volumes.pvc(provisioned_pvc2.key) == provisioned_pvc_higher  # restored
    env.plugin.unreserve(env.state, pod, "node1")


def test_pre_bind_bound_by_pv_controller_before_bind():
    """TestBindPodVolumes bound-by-pv-controller-before-bind: the PV write conflicts."""
    env, writer, _ = prebind_env((unbound_pvc, pv_node1a), controller=None)
    pod = pod_with((unbound_pvc,))
    schedule_and_reserve(env, pod)
    env.cache.add_storage(attrs.evolve(pv_node1a_bound, resource_version="2"))
    env.cache.add_storage(attrs.evolve(bound_pvc_node1a, resource_version="2"))
    status = asyncio.run(env.plugin.pre_bind(env.state, pod, "node1"))
    assert status is not None and status.code == Code.ERROR and "persistentvolumes \"pv-node1a\"" in status.message()
    assert not env.volumes.is_assumed_pv("pv-node1a")


def test_pre_bind_pvc_deleted_while_waiting():
    """TestBindPodVolumes check-fails: the claim is deleted after the write."""
    env, _, fake = prebind_env((unbound_pvc, pv_node1a), controller=None)
    pod = pod_with((unbound_pvc,))
    schedule_and_reserve(env, pod)
    fake.at(3.0, lambda: env.cache.remove_storage(unbound_pvc))
    status = asyncio.run(env.plugin.pre_bind(env.state, pod, "node1"))
    assert status == Status(Code.ERROR, ('binding volumes: failed to check binding: could not find '
                                         'v1.PersistentVolumeClaim "testns/unbound-pvc"',))


def test_pre_bind_pod_deleted_while_waiting():
    env, _, fake = prebind_env((unbound_pvc, pv_node1a), controller=None)
    pod = pod_with((unbound_pvc,))
    schedule_and_reserve(env, pod)
    fake.at(2.0, lambda: env.cache.remove_pod(pod))
    status = asyncio.run(env.plugin.pre_bind(env.state, pod, "node1"))
    assert status == Status(Code.ERROR, ('binding volumes: pod does not exist any more: pod "test-pod" not found',))


@pytest.mark.parametrize("timeout", [0, 3])
def test_pre_bind_times_out(timeout):
    env, _, fake = prebind_env((unbound_pvc, pv_node1a), controller=None, timeout=timeout)
    pod = pod_with((unbound_pvc,))
    schedule_and_reserve(env, pod)
    status = asyncio.run(env.plugin.pre_bind(env.state, pod, "node1"))
    assert status == Status(Code.ERROR, ("binding volumes: context deadline exceeded",))
    assert sum(fake.sleeps) == timeout


def test_pre_bind_provisioning_failed_selected_node_reset():
    """The provisioner gives up and removes selected-node (PV controller's signal to reschedule)."""
    env, _, fake = prebind_env((provisioned_pvc,), controller=None)
    pod = pod_with((provisioned_pvc,))
    schedule_and_reserve(env, pod)

    def give_up() -> None:
        pvc = env.volumes.api_pvc(provisioned_pvc.key)
        env.cache.add_storage(bump(pvc, annotations={"other": "x"}))

    fake.at(2.0, give_up)
    status = asyncio.run(env.plugin.pre_bind(env.state, pod, "node1"))
    assert status == Status(Code.ERROR, ('binding volumes: provisioning failed for PVC "provisioned-pvc"',))


def test_pre_bind_provisioned_pv_on_another_node():
    """TestBindPodVolumes node-affinity-fails-dynamic-provisioning."""
    env, _, fake = prebind_env((selected_node_pvc, pv_node1a, pv_node2), controller=None,
                               nodes=[node1(), make_node("node2", labels={NODE_KEY: "node2"})])
    pod = pod_with((selected_node_pvc,))
    schedule_and_reserve(env, pod)

    def bind_elsewhere() -> None:
        pvc = env.volumes.api_pvc(selected_node_pvc.key)
        env.cache.add_storage(bump(pvc, volume_name="pv-node2", annotations={**pvc.annotations,
                                                                             ANN_BIND_COMPLETED: "yes"}))

    fake.at(5.0, bind_elsewhere)
    status = asyncio.run(env.plugin.pre_bind(env.state, pod, "node1"))
    assert status == Status(Code.ERROR, ('binding volumes: pv "pv-node2" node affinity doesn\'t match node "node1": '
                                         "no matching NodeSelectorTerms",))


def test_pre_bind_node_affinity_fails():
    """TestBindPodVolumes node-affinity-fails: the node lost the label the PV needs."""
    env, _, _ = prebind_env((unbound_pvc, pv_node1a), nodes=[node1()])
    pod = pod_with((unbound_pvc,))
    schedule_and_reserve(env, pod)
    env.cache.update_node(make_node("node1"))
    status = asyncio.run(env.plugin.pre_bind(env.state, pod, "node1"))
    assert status is not None and "node affinity doesn't match node \"node1\"" in status.message()


def test_pre_bind_without_a_volume_writer():
    env = Env([node1()], (unbound_pvc, pv_node1a))
    pod = pod_with((unbound_pvc,))
    schedule_and_reserve(env, pod)
    status = asyncio.run(env.plugin.pre_bind(env.state, pod, "node1"))
    assert status is not None and status.code == Code.ERROR
    assert not env.volumes.is_assumed_pv("pv-node1a")


def test_pre_bind_missing_pod_volumes():
    env, _, _ = prebind_env((unbound_pvc, pv_node1a))
    pod = pod_with((unbound_pvc,))
    env.find(pod)
    status = asyncio.run(env.plugin.pre_bind(env.state, pod, "node2"))
    assert status == Status(Code.ERROR, ('no pod volumes found for node "node2"',))


# -- args, registration, events -----------------------------------------------------------------------


def vb_args(data: object) -> VolumeBindingArgs:
    return structure(VolumeBindingArgs, data, "args", kind="VolumeBindingArgs")


def test_args_defaults_and_validation():
    assert vb_args(None) == VolumeBindingArgs(bind_timeout_seconds=600)
    assert vb_args({"bindTimeoutSeconds": 0}).bind_timeout_seconds == 0
    with pytest.raises(ConfigError) as info:
        vb_args({"bindTimeoutSeconds": -1})
    assert info.value.errors == [("args.bindTimeoutSeconds",
                                  "Invalid value: -1: invalid BindTimeoutSeconds, should not be a negative value")]
    with pytest.raises(ConfigError) as info:
        vb_args({"shape": [{"utilization": 0, "score": 10}]})
    assert info.value.errors[0][0] == "args.shape"
    assert info.value.errors[0][1].endswith(
        "unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring")
    with pytest.raises(ConfigError) as info:
        vb_args({"bindTimeout": 5})
    assert info.value.errors == [("args.bindTimeout", "unknown field")]


def test_args_in_a_configuration():
    catalog = build_registry(autoload=False).catalog()
    data = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "default-scheduler",
                          "pluginConfig": [{"name": NAME, "args": {"bindTimeoutSeconds": -5}}]}]}
    with pytest.raises(ConfigError) as info:
        load_config(data, catalog)
    assert any(path.endswith("pluginConfig[0].args.bindTimeoutSeconds") for path, _ in info.value.errors)


def test_registered_points():
    info = build_registry(autoload=False).plugins[NAME]
    assert info.extension_points == {"preFilter", "filter", "reserve", "preBind"}
    assert info.args_type is VolumeBindingArgs


EVENTS = [(STORAGE_CLASS, "Add"), (STORAGE_CLASS, "Update"), (PERSISTENT_VOLUME_CLAIM, "Add"),
          (PERSISTENT_VOLUME_CLAIM, "Update"), (PERSISTENT_VOLUME, "Add"), (PERSISTENT_VOLUME, "Update"),
          (NODE, "Add"), (NODE, "UpdateNodeLabel"), (CSI_NODE, "Add"), (CSI_NODE, "Update"),
          (CSI_DRIVER, "Update"), (CSI_STORAGE_CAPACITY, "Add"), (CSI_STORAGE_CAPACITY, "Update")]


def test_events_to_register():
    plugin = VolumeBinding(VolumeBindingArgs(), make_handle())
    assert [(e.resource, e.action) for e in plugin.events_to_register()] == EVENTS
    assert requeues(plugin, ClusterEvent(PERSISTENT_VOLUME, "Add"))
    assert not requeues(plugin, ClusterEvent(NODE, "UpdateNodeTaint"))
