"""The shipped RBAC (k8s/rbac.yaml) against the API calls scorer makes, on a real API server with RBAC on.

``scorer_api_calls`` applies k8s/'s Namespace, ServiceAccount and RBAC objects for real and runs the
service as the service account (kubekit's ``scorer`` identity): bind, Events (created and aggregated) in
both API groups, the pod status patch, list and watch of pods, nodes and namespaces, and get/create/update
of its Lease. The first test checks the server allowed each one, and that it refuses what the rules do not grant.

The last test of the session (``run_last``) compares the rules with the API server's audit log: every
request whose user agent is scorer's (``scorer``, ``scorer/<version>``) in the whole session, from any
test, must fit a rule and none may have been denied, and every rule must have been used. Run alone, it
uses the calls of ``scorer_api_calls``.

The calls are the real service's: a ``scorer run`` process as the service account (reflectors, leader
elector, binder, Events with their aggregation, the pod condition), plus the ApiWriter's core v1 Event
path, which the service takes only on a server without events.k8s.io/v1.
"""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
from kubekit import (
    SCORER_NAMESPACE,
    SCORER_USER,
    AuditedRequest,
    Resources,
    find_object,
    render_kustomization,
    run_last,
)
from servicekit import Cluster, ScorerProcess, pod_manifest, scheduler_config, wait_until

from scorer.kube.client import ApiClient
from scorer.kube.config import load_kubeconfig
from scorer.kube.writer import ApiWriter
from scorer.model import pod_from_dict

pytestmark = pytest.mark.kube

NAMESPACE = "rbac-check"  # the pods' namespace: the ClusterRole holds for every namespace
NODE = "rbac-node"
SCHEDULER = "rbac-check"  # no other test's profile has this name
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{SCORER_NAMESPACE}/leases"
MERGE_PATCH = "application/merge-patch+json"
# Requests without a resource that any authenticated client may make (the system:discovery role).
DISCOVERY_PREFIXES = ("/api", "/apis", "/version", "/openapi")


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
        resource = request.resource + (f"/{request.subresource}" if request.subresource else "")
        return (request.api_group, resource, request.verb) == (self.api_group, self.resource, self.verb)


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


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def apply_shipped_rbac(control_plane) -> None:
    resources = Resources(control_plane)
    objects = render_kustomization()
    for kind in ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
        status, body = resources.apply(find_object(objects, kind))
        assert status in (200, 201), (kind, body)


def create(control_plane, path: str, body: dict[str, Any]) -> dict[str, Any]:
    status, raw = control_plane.request("POST", path, orjson.dumps(body))
    assert status in (201, 409), raw  # 409: left by an earlier run of the exercise
    return orjson.loads(raw)


def exercise(control_plane, workdir: Path) -> list[tuple[str, int]]:
    """A real `scorer run` as the service account (leader election on its Lease, a pod it binds, a pod
    that fits nowhere and is retried, so its FailedScheduling Event is aggregated, then SIGTERM, which
    releases the Lease), plus the core v1 Event fallback of the ApiWriter (a server without
    events.k8s.io/v1; 1.20 serves it, so the service never takes that path here). Returns what the
    audit log shows the service account did: ("<verb> <group>/<resource>", HTTP status) per request."""
    create(control_plane, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": NAMESPACE}})
    create(control_plane, "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE},
                                            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
    config = scheduler_config(workdir / "rbac-config.yaml", SCHEDULER, leader_elect=True, lease="scorer",
                              namespace=SCORER_NAMESPACE)
    proc = ScorerProcess(workdir, config, control_plane.kubeconfig_for("scorer"), name="scorer-rbac")
    try:
        proc.wait_ready()
        wait_until(lambda: proc.metric("scorer_leader_election_is_leader") == 1, 60, "scorer to lead")
        for name, cpu in (("rbac-bound", "100m"), ("rbac-pending", "100")):
            create(control_plane, f"/api/v1/namespaces/{NAMESPACE}/pods",
                   pod_manifest(name, namespace=NAMESPACE, scheduler=SCHEDULER, cpu=cpu))
        api = Cluster(control_plane)
        wait_until(lambda: "rbac-bound" in api.bound(NAMESPACE), 60, "rbac-bound bound")

        def failed() -> list[dict[str, Any]]:
            return [e for e in api.events(NAMESPACE, "rbac-pending") if e["reason"] == "FailedScheduling"]

        wait_until(failed, 60, "the FailedScheduling event")
        # More allocatable CPU on the node (still too little) retries the pod (UpdateNodeAllocatable); its
        # identical Event is aggregated into the first one's series (a PATCH).
        status, raw = control_plane.request("PATCH", f"/api/v1/nodes/{NODE}/status",
                                            orjson.dumps({"status": {"allocatable": {"cpu": "5"}}}),
                                            content_type=MERGE_PATCH)
        assert status == 200, raw
        wait_until(lambda: (failed()[0].get("series") or {}).get("count", 1) >= 2, 60, "the Event's series")
        assert proc.terminate() == 0
        assert not [line for line in proc.log().splitlines() if "forbidden" in line.lower() or " 403" in line]
    finally:
        proc.stop()
    asyncio.run(core_event_fallback(control_plane))
    return [(f"{r.verb} {r.api_group}/{r.resource}" + (f"/{r.subresource}" if r.subresource else ""), r.code)
            for r in control_plane.audited_requests() if r.user == SCORER_USER and r.user_agent.startswith("scorer")]


async def core_event_fallback(control_plane) -> None:
    """ApiWriter's core v1 path (used when events.k8s.io/v1 is not served): an Event, then its repeat."""
    _, raw = control_plane.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/rbac-pending")
    pod = pod_from_dict(orjson.loads(raw))
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig_for("scorer"))) as client:
        core = ApiWriter(client, controller=SCHEDULER)
        core._events_v1 = False  # as on a server without events.k8s.io/v1
        for _ in range(2):
            await core.write_event(pod, "Warning", "FailedScheduling", "Scheduling", "core v1 fallback check")


@pytest.fixture(scope="session")
def scorer_api_calls(control_plane, tmp_path_factory) -> list[tuple[str, int]]:
    """The exercise, once per session (the first test and the session's last one both need it)."""
    apply_shipped_rbac(control_plane)
    try:
        return exercise(control_plane, tmp_path_factory.mktemp("rbac"))
    finally:  # leave the shared API server as other tests expect it: no extra node, pods or held Lease
        pods = f"/api/v1/namespaces/{NAMESPACE}/pods"
        for path in (f"{pods}/rbac-bound", f"{pods}/rbac-pending", f"/api/v1/nodes/{NODE}", f"{LEASE}/scorer"):
            status, body = control_plane.request("DELETE", path + "?gracePeriodSeconds=0")
            assert status in (200, 202, 404), (path, status, body)


def test_the_service_account_may_make_every_call_of_the_service(scorer_api_calls) -> None:
    made = {what for what, _ in scorer_api_calls}
    assert made >= {
        "create /pods/binding", "patch /pods/status", "create events.k8s.io/events", "patch events.k8s.io/events",
        "create /events", "patch /events",
        *(f"{verb} /{resource}" for resource in ("pods", "nodes", "namespaces") for verb in ("list", "watch")),
        "get coordination.k8s.io/leases", "update coordination.k8s.io/leases"}, made
    for what, status in scorer_api_calls:
        if what == "get coordination.k8s.io/leases" and status == 404:
            continue  # no Lease yet: allowed, and the elector creates it
        if what in ("create coordination.k8s.io/leases", "update coordination.k8s.io/leases") and status == 409:
            continue  # optimistic concurrency: another writer of the Lease came first; the elector reads again
        assert 200 <= status < 300, (what, status)


async def test_the_service_account_may_do_nothing_else(control_plane, scorer_api_calls) -> None:
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
                ("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/rbac-pending"),  # get is not granted, list is
                ("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/rbac-pending"),
                ("POST", "/api/v1/nodes"),
                ("GET", "/api/v1/secrets"),
                ("GET", "/api/v1/configmaps")):
            response = await client.request(method, path, body={} if method in ("PUT", "POST") else None)
            refused.append((method, path, response.status))
    assert [entry for entry in refused if entry[2] != 403] == []


def test_the_audit_log_names_the_scorer_identity(control_plane, scorer_api_calls) -> None:
    binds = [r for r in control_plane.audited_requests()
             if r.user == SCORER_USER and (r.resource, r.subresource, r.verb) == ("pods", "binding", "create")]
    assert binds and binds[0].namespace == NAMESPACE and binds[0].code == 201
    assert binds[0].user_agent.startswith("scorer") and binds[0].decision == "allow"


@run_last
def test_the_rules_are_exactly_what_scorer_used_in_this_session(control_plane, scorer_api_calls) -> None:
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
    assert unused == [], "rules that no request of scorer's used: drop them (or test the code that uses them)"
    # The service account itself used what the namespaced Role grants, in its namespace, on its Lease.
    for grant in (g for g in grants if g.namespace):
        used = [r for r in resource_requests if grant.fits(r) and r.user == SCORER_USER]
        assert used and all(r.namespace == grant.namespace for r in used), grant
        assert not grant.names or all(r.name in grant.names for r in used), grant
