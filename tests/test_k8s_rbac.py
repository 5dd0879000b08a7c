"""The shipped RBAC (k8s/rbac.yaml) against the API calls scorer makes, on a real API server with RBAC on.

``scorer_exercise`` applies k8s/'s Namespace, ServiceAccount and RBAC objects for real, then runs
``scorer run`` as a process under the service account (kubekit's ``scorer`` identity) against the
session's control plane, with leader election on the Lease the Role names (``scorer-system/scorer``)
and a profile whose schedulerName only this module's pods use. The service makes its calls itself:

* its caches sync: LIST, then WATCH, of namespaces, services, replicationcontrollers, replicasets,
  statefulsets, poddisruptionbudgets (policy/v1beta1 on this 1.20 server, found by discovery), nodes and
  pods (the reflectors);
* the Lease is absent at first: GET (404), create, then renewals (update);
* a pod that fits: ``pods/binding`` create, and a ``Scheduled`` Event (events.k8s.io create);
* a pod with two claims on a node of its own (VolumeBinding): a WaitForFirstConsumer claim with a
  matching local volume (PreBind patches the volume's claimRef: persistentvolumes patch) and one of a
  class with a provisioner (PreBind patches the claim's selected-node annotation:
  persistentvolumeclaims patch). No PersistentVolume controller runs here: the test does its part as
  the admin (``kubekit.complete_binding``, and ``provision_volume`` as the external provisioner), and
  the pod is bound once both claims are;
* the storage reflectors: LIST and WATCH of persistentvolumes, persistentvolumeclaims, storageclasses,
  csinodes, csidrivers and csistoragecapacities (storage.k8s.io/v1alpha1 on this 1.20 server, which the
  session's control plane enables; found by discovery);
* a pod that fits nowhere: a ``FailedScheduling`` Event and the ``PodScheduled=False`` condition
  (``pods/status`` patch); then the allocatable of the test's node grows, still too little, so the pod is
  tried again (``UpdateNodeAllocatable``) and fails with the same message: the writer counts the repeat in
  the Event's series (events.k8s.io patch);
* SIGTERM: the service releases the Lease (update) and exits 0.

The core v1 Events rule is for the writer's fallback on API servers that do not serve events.k8s.io/v1.
kube-apiserver 1.20 serves it, so the service never takes that path here. The exercise shows the fallback
separately, clearly apart from the service: scorer's ``ApiWriter`` behind a proxy that answers 404 for
events.k8s.io, under the user agent ``FALLBACK_AGENT``, writes a ``FailedScheduling`` Event and its
repeat (core create, core patch).

The tests check that the server allowed every call and the service logged no refusal, and that the
identity is refused what the rules do not grant. The last test of the session (``run_last``) compares
the rules with the API server's audit log: every request whose user agent is scorer's (``scorer``,
``scorer/<version>``) in the whole session, from any test, must fit a rule and none may have been
denied, and every rule must have been used.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
from faultproxy import FaultProxy, status_body
from kubekit import (
    SCORER_NAMESPACE,
    SCORER_TOKEN,
    SCORER_USER,
    AuditedRequest,
    Resources,
    complete_binding,
    delete_storage,
    find_object,
    local_volume,
    provision_volume,
    render_kustomization,
    run_last,
)
from servicekit import Cluster, ScorerProcess, node_manifest, pod_manifest, scheduler_config, wait_until

from scorer.kube.client import ApiClient
from scorer.kube.config import load_kubeconfig
from scorer.kube.early import USER_AGENT
from scorer.kube.writer import ApiWriter
from scorer.model import pod_from_dict

pytestmark = pytest.mark.kube

NAMESPACE = "rbac-check"  # the pods' namespace: the ClusterRole holds for every namespace
SCHEDULER = "rbac-check"  # the profile's schedulerName: no other test's pods use it
NODE = "rbac-node"  # nodes are cluster-wide: other tests' nodes may be there too
FITS, FITS_NOWHERE = "rbac-fits", "rbac-fits-nowhere"
PREEMPTOR, PRIORITY_CLASS = "rbac-preemptor", "rbac-urgent"  # needs the node FITS is on; preempts FITS
LEASE_NAME = "scorer"  # the Lease k8s/configmap.yaml names and the Role allows
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{SCORER_NAMESPACE}/leases"
FALLBACK_AGENT = f"{USER_AGENT} (core-v1-events-fallback)"
WAIT = 90.0  # seconds for each step of the exercise: the machine is shared and busy
# A refusal as the service would log it: the API's Status message ("... is forbidden: User ...") or the code.
REFUSAL = re.compile(r"forbidden|HTTP 403", re.IGNORECASE)
# Requests without a resource that any authenticated client may make (the system:discovery role).
DISCOVERY_PREFIXES = ("/api", "/apis", "/version", "/openapi")

Kind = tuple[str, str, str]  # (API group, resource[/subresource], verb)
LISTED: tuple[tuple[str, str], ...] = (
    *(("", resource) for resource in ("pods", "nodes", "namespaces", "services", "replicationcontrollers",
                                      "persistentvolumes", "persistentvolumeclaims")),
    ("apps", "replicasets"), ("apps", "statefulsets"), ("policy", "poddisruptionbudgets"),
    *(("storage.k8s.io", resource) for resource in ("storageclasses", "csinodes", "csidrivers",
                                                    "csistoragecapacities")))
VOLUME_NODE = "rbac-volume-node"  # the volume pod's node: apart from NODE, where preemption happens
VOLUME_POD, STATIC_CLAIM, DYNAMIC_CLAIM = "rbac-volumes", "rbac-static", "rbac-dynamic"
STATIC_CLASS, DYNAMIC_CLASS, PROVISIONER = "rbac-local", "rbac-provisioned", "example.com/rbac"
STATIC_PV, DYNAMIC_PV = "rbac-local-pv", "rbac-provisioned-pv"
# A non-resource GET: the PodDisruptionBudgets reflector asks discovery which policy version is served
# (/apis/policy/v1: 404 on this 1.20 server, then /apis/policy/v1beta1).
DISCOVERY: Kind = ("", "", "get")
SERVICE_CALLS: set[Kind] = {
    *((group, resource, verb) for group, resource in LISTED for verb in ("list", "watch")), DISCOVERY,
    ("", "pods/binding", "create"), ("", "pods/status", "patch"), ("", "pods", "delete"),
    ("", "persistentvolumes", "patch"), ("", "persistentvolumeclaims", "patch"),
    ("events.k8s.io", "events", "create"), ("events.k8s.io", "events", "patch"),
    ("coordination.k8s.io", "leases", "get"), ("coordination.k8s.io", "leases", "create"),
    ("coordination.k8s.io", "leases", "update")}
FALLBACK_CALLS: set[Kind] = {("", "events", "create"), ("", "events", "patch")}
# Answers that are allowed and expected without being a 2xx: the Lease absent at first, and a Lease write
# that lost an optimistic-concurrency race (a renewal cut short by SIGTERM; the release then re-reads), and a
# group version discovery says is not served, with the list asked for early at that version
# (scorer.kube.early: each candidate version's list, the one the reflector chooses taken).
EXPECTED_ANSWERS = {(("coordination.k8s.io", "leases", "get"), 404),
                    (("coordination.k8s.io", "leases", "update"), 409),
                    (DISCOVERY, 404), (("policy", "poddisruptionbudgets", "list"), 404),
                    (("storage.k8s.io", "csistoragecapacities", "list"), 404)}


def kind_of(request: AuditedRequest) -> Kind:
    resource = request.resource + (f"/{request.subresource}" if request.subresource else "")
    return request.api_group, resource, request.verb


@attrs.frozen(slots=True)
class Grant:
    """One verb on one resource of one API group, from a rule (namespace "" = every namespace)."""

    api_group: str
    resource: str  # "pods" or "pods/binding"
    verb: str
    namespace: str = ""
    names: tuple[str, ...] = ()

    def fits(self, request: AuditedRequest) -> bool:
        """The request is of this kind (namespace and names aside: other tests use other ones)."""
        return kind_of(request) == (self.api_group, self.resource, self.verb)


def shipped_grants() -> list[Grant]:
    objects = render_kustomization()
    grants = []
    for kind in ("ClusterRole", "Role"):
        role = find_object(objects, kind)
        namespace = role["metadata"].get("namespace", "")
        for rule in role["rules"]:
            assert set(rule) <= {"apiGroups", "resources", "verbs", "resourceNames"}, rule
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], "no wildcards"
            grants.extend(Grant(group, resource, verb, namespace, tuple(rule.get("resourceNames", ())))
                          for group in rule["apiGroups"] for resource in rule["resources"] for verb in rule["verbs"])
    return grants


def apply_shipped_rbac(control_plane) -> None:
    resources = Resources(control_plane)
    objects = render_kustomization()
    for kind in ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
        status, body = resources.apply(find_object(objects, kind))
        assert status in (200, 201), (kind, body)


@attrs.frozen
class Exercise:
    """What the exercise saw: the scorer identity's audited requests while it ran, and their effects."""

    requests: list[AuditedRequest]
    log: str  # the service's output
    exit_code: int  # of the service, after SIGTERM
    bound_to: str  # the node of the pod that fits
    preempted: list[dict[str, Any]]  # the Preempted Events of the pod that fits, once the preemptor needed its room
    preemptor_bound_to: str  # the node of the preemptor, bound once its victim was gone
    volume_pod_bound_to: str  # the node of the pod with two claims, bound once both were
    failed: dict[str, Any]  # the FailedScheduling Event (events.k8s.io/v1) once its series was patched
    condition: dict[str, Any]  # the PodScheduled condition of the pod that fits nowhere
    lease: dict[str, Any]  # the Lease after SIGTERM
    fallback_hits: int  # events.k8s.io POSTs the proxy answered 404
    fallback_events: list[dict[str, Any]]  # the core v1 Events the fallback wrote


def delete(control_plane, path: str) -> None:
    status, body = control_plane.request("DELETE", path + "?gracePeriodSeconds=0")
    assert status in (200, 202, 404), (path, status, body)


def pod_scheduled(cluster: Cluster, name: str) -> dict[str, Any] | None:
    conditions = cluster.pods(NAMESPACE)[name]["status"].get("conditions") or []
    return next((c for c in conditions if c["type"] == "PodScheduled"), None)


def events(cluster: Cluster, pod: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in cluster.events(NAMESPACE, pod) if e["reason"] == reason]


def storage_objects() -> dict[str, dict[str, Any]]:
    """The classes, volume and claims of the volume pod, by collection path."""
    def claim(name: str, storage_class: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                         "resources": {"requests": {"storage": "1Gi"}}}}

    def storage_class(name: str, provisioner: str) -> dict[str, Any]:
        return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer"}

    claims = f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims"
    return {f"/apis/storage.k8s.io/v1/storageclasses/{STATIC_CLASS}": storage_class(STATIC_CLASS,
                                                                                   "kubernetes.io/no-provisioner"),
            f"/apis/storage.k8s.io/v1/storageclasses/{DYNAMIC_CLASS}": storage_class(DYNAMIC_CLASS, PROVISIONER),
            f"/api/v1/persistentvolumes/{STATIC_PV}": local_volume(STATIC_PV, VOLUME_NODE, storage_class=STATIC_CLASS),
            f"{claims}/{STATIC_CLAIM}": claim(STATIC_CLAIM, STATIC_CLASS),
            f"{claims}/{DYNAMIC_CLAIM}": claim(DYNAMIC_CLAIM, DYNAMIC_CLASS)}


def bind_volumes(cluster: Cluster, step: Callable[[Callable[[], Any], str], Any]) -> str:
    """The volume pod: scorer writes the static volume's claimRef and the dynamic claim's selected node;
    the test, as the PV controller and the provisioner, binds both; scorer then binds the pod."""
    plane = cluster.plane
    for path, obj in storage_objects().items():
        cluster.call("POST", path.rpartition("/")[0], obj)
    # A new volume is Pending until the PV controller makes it Available; scorer binds only Available ones.
    status, body = plane.request("PATCH", f"/api/v1/persistentvolumes/{STATIC_PV}/status",
                                 b'{"status": {"phase": "Available"}}', "application/merge-patch+json")
    assert status == 200, body
    cluster.create_all([pod_manifest(VOLUME_POD, namespace=NAMESPACE, scheduler=SCHEDULER, spec={
        "volumes": [{"name": "a", "persistentVolumeClaim": {"claimName": STATIC_CLAIM}},
                    {"name": "b", "persistentVolumeClaim": {"claimName": DYNAMIC_CLAIM}}]})])
    claims = f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims"
    step(lambda: (cluster.call("GET", f"/api/v1/persistentvolumes/{STATIC_PV}")["spec"].get("claimRef") or {})
         .get("uid"), "the static volume's claimRef written by scorer")
    node = step(lambda: (cluster.call("GET", f"{claims}/{DYNAMIC_CLAIM}")["metadata"].get("annotations") or {})
                .get("volume.kubernetes.io/selected-node"), "the dynamic claim's selected node written by scorer")
    assert node == VOLUME_NODE
    provision_volume(plane, NAMESPACE, DYNAMIC_CLAIM, node, name=DYNAMIC_PV, provisioner=PROVISIONER)
    complete_binding(plane, STATIC_PV, NAMESPACE, STATIC_CLAIM)
    complete_binding(plane, DYNAMIC_PV, NAMESPACE, DYNAMIC_CLAIM)
    return str(step(lambda: cluster.bound(NAMESPACE).get(VOLUME_POD), "the volume pod bound"))


def run_service(control_plane, cluster: Cluster, workdir: Path) -> dict[str, Any]:
    """``scorer run`` as the service account, through every call it makes; what it did."""
    config = scheduler_config(workdir / "config.yaml", SCHEDULER, leader_elect=True, lease=LEASE_NAME,
                              namespace=SCORER_NAMESPACE)  # leaseDuration 4s, renewDeadline 3s, retryPeriod 500ms
    proc = ScorerProcess(workdir, config, control_plane.kubeconfig_for("scorer"), name="scorer-rbac")

    def step(predicate: Callable[[], Any], what: str) -> Any:
        """Wait for ``what``; when it does not come, say what the service was refused (a missing rule)."""
        try:
            return wait_until(predicate, WAIT, what)
        except AssertionError as error:
            refusals = [line for line in proc.log().splitlines() if REFUSAL.search(line)]
            raise AssertionError(f"{error}; the service logged {len(refusals)} refusals: {refusals[:5]}") from None

    try:
        step(lambda: proc.exited() or proc.probe("/readyz") == 200, "the service ready")
        step(lambda: proc.exited() or proc.metric("scorer_leader_election_is_leader") == 1, "the lease taken")
        assert not proc.exited(), proc.log()[-3000:]
        cluster.create_all([
            pod_manifest(FITS, namespace=NAMESPACE, scheduler=SCHEDULER,
                         spec={"nodeSelector": {"kubernetes.io/hostname": NODE}}),
            pod_manifest(FITS_NOWHERE, namespace=NAMESPACE, scheduler=SCHEDULER, cpu="100000")])
        volume_pod_bound_to = bind_volumes(cluster, step)
        bound_to = step(lambda: cluster.bound(NAMESPACE).get(FITS), "the pod that fits bound")
        step(lambda: events(cluster, FITS, "Scheduled"), "its Scheduled event")
        step(lambda: events(cluster, FITS_NOWHERE, "FailedScheduling"), "a FailedScheduling event")
        condition = step(lambda: pod_scheduled(cluster, FITS_NOWHERE), "the PodScheduled condition")
        # A pod of higher priority that needs the node: scorer deletes the pod that fits (its only victim).
        cluster.create_priority_class(PRIORITY_CLASS, 1000)
        cluster.create_all([pod_manifest(PREEMPTOR, namespace=NAMESPACE, scheduler=SCHEDULER, cpu="3950m",
                                         spec={"nodeSelector": {"kubernetes.io/hostname": NODE},
                                               "priorityClassName": PRIORITY_CLASS})])
        step(lambda: cluster.pods(NAMESPACE)[FITS]["metadata"].get("deletionTimestamp"), "the victim deleted")
        delete(control_plane, f"/api/v1/namespaces/{NAMESPACE}/pods/{FITS}")  # as its kubelet would, at once
        preemptor_bound_to = step(lambda: cluster.bound(NAMESPACE).get(PREEMPTOR), "the preemptor bound")
        preempted = step(lambda: events(cluster, FITS, "Preempted"), "the victim's Preempted event")
        # More CPU on the node, still far too little: the pod is tried again and fails the same way.
        allocatable = {"cpu": "8", "memory": "16Gi", "pods": "110"}
        status, body = control_plane.request("PATCH", f"/api/v1/nodes/{NODE}/status", orjson.dumps(
            {"status": {"allocatable": allocatable, "capacity": allocatable}}), "application/merge-patch+json")
        assert status == 200, body
        failed = step(lambda: [e for e in events(cluster, FITS_NOWHERE, "FailedScheduling")
                               if (e.get("series") or {}).get("count", 1) >= 2],
                      "the repeated FailedScheduling counted in the Event's series")[0]
        exit_code = proc.terminate(timeout=30)
        lease = cluster.call("GET", f"{LEASE}/{LEASE_NAME}")
        return {"log": proc.log(), "exit_code": exit_code, "bound_to": bound_to, "failed": failed,
                "preempted": preempted, "preemptor_bound_to": preemptor_bound_to,
                "volume_pod_bound_to": volume_pod_bound_to,
                "condition": condition, "lease": lease}
    finally:
        proc.stop()


async def core_events_fallback(control_plane, workdir: Path, note: str) -> tuple[int, list[dict[str, Any]]]:
    """The writer's path on a server without events.k8s.io/v1: as the service account, scorer's ``ApiWriter``
    behind a proxy that answers 404 there writes a FailedScheduling Event and its repeat (core v1)."""
    status, raw = control_plane.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{FITS_NOWHERE}")
    assert status == 200, raw
    pod = pod_from_dict(orjson.loads(raw))
    async with FaultProxy(control_plane.url) as proxy:
        not_served = proxy.add(method="POST", path=r"^/apis/events\.k8s\.io/", count=None, status=404,
                               body=status_body(404, "NotFound", "the server could not find the requested resource"))
        kubeconfig = proxy.write_kubeconfig(workdir / "kubeconfig-fallback", token=SCORER_TOKEN)
        async with ApiClient(load_kubeconfig(kubeconfig), user_agent=FALLBACK_AGENT) as client:
            writer = ApiWriter(client, controller=SCHEDULER)
            for _ in range(2):  # the second is a repeat: the writer patches the Event's count
                await writer.write_event(pod, "Warning", "FailedScheduling", "Scheduling", note)
    status, raw = control_plane.request("GET", f"/api/v1/namespaces/{NAMESPACE}/events")
    written = [e for e in orjson.loads(raw)["items"] if e["involvedObject"]["name"] == FITS_NOWHERE
               and (e.get("source") or {}).get("component") == SCHEDULER]
    return not_served.hits, written


@pytest.fixture(scope="session")
def scorer_exercise(control_plane, tmp_path_factory) -> Exercise:
    """The exercise, once per session (the first tests and the session's last one all need it)."""
    apply_shipped_rbac(control_plane)
    cluster = Cluster(control_plane)
    workdir = tmp_path_factory.mktemp("rbac")
    cluster.ensure_namespace(NAMESPACE)
    delete(control_plane, f"{LEASE}/{LEASE_NAME}")  # absent: the elector reads 404 and creates it
    cluster.create_all([node_manifest(NODE, cpu="4"), node_manifest(VOLUME_NODE, cpu="4")])
    start = len(control_plane.audited_requests())
    try:
        seen = run_service(control_plane, cluster, workdir)
        hits, fallback = asyncio.run(core_events_fallback(control_plane, workdir, seen["failed"]["note"]))
        requests = [r for r in control_plane.audited_requests()[start:] if r.user == SCORER_USER]
        return Exercise(requests=requests, fallback_hits=hits, fallback_events=fallback, **seen)
    finally:  # leave the shared API server as other tests expect it: no extra node, pods or Lease
        cluster.delete_pods(NAMESPACE)
        for path in (f"/api/v1/nodes/{NODE}", f"/api/v1/nodes/{VOLUME_NODE}", f"{LEASE}/{LEASE_NAME}",
                     f"/apis/scheduling.k8s.io/v1/priorityclasses/{PRIORITY_CLASS}"):
            delete(control_plane, path)
        for path in (*storage_objects(), f"/api/v1/persistentvolumes/{DYNAMIC_PV}"):
            delete_storage(control_plane, path)


def test_the_service_made_every_call_as_the_service_account_and_was_allowed(scorer_exercise) -> None:
    service = [r for r in scorer_exercise.requests if r.user_agent == USER_AGENT]
    fallback = [r for r in scorer_exercise.requests if r.user_agent == FALLBACK_AGENT]
    assert len(service) + len(fallback) == len(scorer_exercise.requests), "requests of no known user agent"
    assert {kind_of(r) for r in service} == SERVICE_CALLS
    assert {kind_of(r) for r in fallback} == FALLBACK_CALLS
    assert [r for r in scorer_exercise.requests if r.denied] == []
    unexpected = [(kind_of(r), r.code, r.uri) for r in service + fallback
                  if not 200 <= r.code < 300 and (kind_of(r), r.code) not in EXPECTED_ANSWERS
                  and not (r.verb == "watch" and r.code == 0)]  # 0: a watch whose end was not logged yet
    assert unexpected == []
    succeeded = {kind_of(r) for r in service + fallback if 200 <= r.code < 300}
    # Every call succeeded at least once; the Lease is only read when absent (404) or after a conflict.
    assert succeeded >= (SERVICE_CALLS | FALLBACK_CALLS) - {("coordination.k8s.io", "leases", "get")}


def test_the_calls_did_what_the_service_needs(scorer_exercise) -> None:
    exercise = scorer_exercise
    assert exercise.exit_code == 0, exercise.log[-3000:]
    assert exercise.bound_to == NODE
    assert exercise.preemptor_bound_to == NODE
    assert exercise.volume_pod_bound_to == VOLUME_NODE
    assert len(exercise.preempted) == 1 and f"on node {NODE}" in exercise.preempted[0]["note"]
    note = exercise.failed["note"]
    assert re.fullmatch(r"0/\d+ nodes are available: .*\d+ Insufficient cpu.*\.", note), note
    assert exercise.failed["series"]["count"] >= 2 and exercise.failed["type"] == "Warning"
    assert (exercise.condition["status"], exercise.condition["reason"], exercise.condition["message"]) == (
        "False", "Unschedulable", note)
    assert not exercise.lease["spec"].get("holderIdentity"), exercise.lease  # released on SIGTERM
    assert "acquired lease" in exercise.log and "released lease" in exercise.log
    # The fallback: events.k8s.io refused by the proxy, the Event written in core v1 with the repeat counted.
    assert exercise.fallback_hits == 1  # then the writer stays on core v1
    assert [(e["reason"], e["message"], e["count"]) for e in exercise.fallback_events] == [
        ("FailedScheduling", note, 2)]


def test_the_service_under_the_scorer_identity_logged_no_refusal(scorer_exercise) -> None:
    assert [line for line in scorer_exercise.log.splitlines() if REFUSAL.search(line)] == []


async def test_the_service_account_may_do_nothing_else(control_plane, scorer_exercise) -> None:
    """RBAC is on and the rules are tight: the scorer identity is refused what they do not grant.

    (User agent ``rbac-probe``: these refusals are the point here, not requests of scorer's.)
    """
    access = load_kubeconfig(control_plane.kubeconfig_for("scorer"))
    refused = []
    async with ApiClient(access, user_agent="rbac-probe") as client:
        for method, path in (
                ("GET", f"{LEASE}/kube-scheduler"),  # another Lease of its namespace: the Role names one
                ("PUT", f"{LEASE}/other"),
                ("GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/scorer"),  # another namespace
                ("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{FITS_NOWHERE}"),  # get is not granted, list is
                ("POST", f"/apis/apps/v1/namespaces/{NAMESPACE}/replicasets"),  # workloads: list and watch only
                ("GET", f"/apis/policy/v1beta1/namespaces/{NAMESPACE}/poddisruptionbudgets/any"),
                ("DELETE", f"/api/v1/namespaces/{NAMESPACE}/services/any"),
                ("POST", "/api/v1/nodes"),
                ("GET", f"/api/v1/persistentvolumes/{STATIC_PV}"),  # volumes: list, watch and patch only
                ("PUT", f"/api/v1/persistentvolumes/{STATIC_PV}"),
                ("DELETE", f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims/{STATIC_CLAIM}"),
                ("POST", "/apis/storage.k8s.io/v1/storageclasses"),
                ("GET", "/api/v1/secrets"),
                ("GET", "/api/v1/configmaps")):
            response = await client.request(method, path, body={} if method in ("PUT", "POST") else None)
            refused.append((method, path, response.status))
            # What the service would log of such an answer is what the log check looks for.
            assert REFUSAL.search(f"HTTP {response.status}: {response.reason()}"), (method, path)
    assert [entry for entry in refused if entry[2] != 403] == []


def test_the_audit_log_names_the_scorer_identity(control_plane, scorer_exercise) -> None:
    binds = [r for r in control_plane.audited_requests()
             if r.user == SCORER_USER and (r.resource, r.subresource, r.verb) == ("pods", "binding", "create")]
    assert binds and binds[0].namespace == NAMESPACE and binds[0].code == 201
    assert binds[0].user_agent == USER_AGENT and binds[0].decision == "allow"  # the service's own bind


@run_last
def test_the_rules_are_exactly_what_scorer_used_in_this_session(control_plane, scorer_exercise) -> None:
    grants = shipped_grants()
    requests = [r for r in control_plane.audited_requests() if r.user_agent.startswith("scorer")]
    assert requests, "no request of scorer's was audited"
    denied = [r for r in requests if r.denied]
    assert denied == [], "scorer was refused these calls: the rules miss them"
    resource_requests = [r for r in requests if r.resource]
    other = [r.uri for r in requests if not r.resource and not r.uri.startswith(DISCOVERY_PREFIXES)]
    assert other == [], "non-resource requests no rule can grant"
    uncovered = sorted({(r.api_group, r.resource, r.subresource, r.verb) for r in resource_requests
                        if not any(grant.fits(r) for grant in grants)})
    assert uncovered == [], "scorer made these calls (as some identity) but the rules do not grant them"
    unused = [grant for grant in grants if not any(grant.fits(r) for r in resource_requests)]
    assert unused == [], (
        "rules that no request of scorer's used: drop them (or test the code that uses them)")
    # Each rule was used by the service account itself (the exercise), not only by tests running as admin.
    unused_by_the_account = [grant for grant in grants
                             if not any(grant.fits(r) and r.user == SCORER_USER for r in resource_requests)]
    assert unused_by_the_account == []
    # The service account itself used what the namespaced Role grants, in its namespace, on its Lease.
    for grant in (g for g in grants if g.namespace):
        used = [r for r in resource_requests if grant.fits(r) and r.user == SCORER_USER]
        assert used and all(r.namespace == grant.namespace for r in used), grant
        assert not grant.names or all(r.name in grant.names for r in used), grant
