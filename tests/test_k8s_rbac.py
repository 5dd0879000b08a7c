"""The shipped RBAC (k8s/rbac.yaml) against the API calls scorer makes, on a real API server with RBAC on.

``scorer_api_calls`` applies k8s/'s Namespace, ServiceAccount and RBAC objects for real and makes, as the
service account (kubekit's ``scorer`` identity), every call the service makes: bind, Events in both API
groups, the pod status patch, list and watch of pods, nodes and namespaces, and get/create/update of its
Lease. The first test checks the server allowed each one, and that it refuses what the rules do not grant.

The last test of the session (``run_last``) compares the rules with the API server's audit log: every
request whose user agent is scorer's (``scorer``, ``scorer/<version>``) in the whole session, from any
test, must fit a rule and none may have been denied, and every rule must have been used. Run alone, it
uses the calls of ``scorer_api_calls``.

Some calls below stand in for parts of the service being written (marked STAND-IN): the reflectors' list
and watch, the leader elector's Lease calls, and the aggregating event recorder's patch are sent with
scorer's ``ApiClient`` until those parts exist; replace each with the real part's call then, so that the
comparison measures what the code does.
"""

from __future__ import annotations

import asyncio
import datetime
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

from scorer.kube.client import ApiClient
from scorer.kube.config import load_kubeconfig
from scorer.kube.writer import ApiWriter
from scorer.model import pod_from_dict

pytestmark = pytest.mark.kube

NAMESPACE = "rbac-check"  # the pods' namespace: the ClusterRole holds for every namespace
NODE = "rbac-node"
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


async def exercise(control_plane) -> list[tuple[str, int]]:
    """Every call of the service, as its service account; (what, HTTP status) of each."""
    create(control_plane, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": NAMESPACE}})
    create(control_plane, "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE},
                                            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
    pods = [pod_from_dict(create(control_plane, f"/api/v1/namespaces/{NAMESPACE}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE},
        # No profile of any test has this scheduler name: no scheduler started on this API server takes them.
        "spec": {"schedulerName": "rbac-check", "containers": [{"name": "c", "image": "pause"}]}}))
        for name in ("rbac-bound", "rbac-pending")]
    calls: list[tuple[str, int]] = []
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig_for("scorer"))) as client:
        assert client.user_agent.startswith("scorer")

        async def call(what: str, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
            response = await client.request(method, path, **kwargs)
            calls.append((what, response.status))
            return response.json() if response.status < 300 else {}

        # The binder, the event recorder and the condition writer: scorer's ApiWriter.
        writer = ApiWriter(client, controller="scorer")
        before = client.requests
        await writer.bind(pods[0], NODE)  # raises unless 201
        await writer.write_event(pods[0], "Normal", "Scheduled", "Binding",
                                 f"Successfully assigned {pods[0].key} to {NODE}")
        message = "0/1 nodes are available: 1 Insufficient cpu."
        await writer.write_pod_condition(pods[1], "False", "Unschedulable", message)
        core = ApiWriter(client, controller="scorer")
        core._events_v1 = False  # as on a server without events.k8s.io/v1: the core v1 fallback
        await core.write_event(pods[1], "Warning", "FailedScheduling", "Scheduling", message)
        # ApiWriter raises unless the server said 2xx: these are the statuses it got.
        calls.extend([("bind", 201), ("event events.k8s.io", 201), ("pods/status", 200), ("event core", 201)])
        assert client.requests - before == 4
        # STAND-IN for the event recorder's aggregation: the repeated Event's count is patched.
        for group_path, reason, patch in (
                (f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events", "Scheduled",
                 {"series": {"count": 2, "lastObservedTime": now()}}),
                (f"/api/v1/namespaces/{NAMESPACE}/events", "FailedScheduling",
                 {"count": 2, "lastTimestamp": now()[:19] + "Z"})):
            status, raw = control_plane.request("GET", group_path)  # the name, as the recorder remembers it
            [event] = [e for e in orjson.loads(raw)["items"] if e["reason"] == reason]
            await call(f"patch {group_path}", "PATCH", f"{group_path}/{event['metadata']['name']}", body=patch,
                       content_type=MERGE_PATCH)
        # STAND-IN for the reflectors: a paginated LIST, then a WATCH from its resourceVersion.
        async def reflect(resource: str) -> None:
            listed = await call(f"list {resource}", "GET", f"/api/v1/{resource}", params={"limit": "500"})
            await call(f"watch {resource}", "GET", f"/api/v1/{resource}", params={
                "watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": "1",
                "resourceVersion": listed["metadata"]["resourceVersion"]})

        await asyncio.gather(*(reflect(resource) for resource in ("pods", "nodes", "namespaces")))
        # STAND-IN for the leader elector: get (absent at first), create, get and renew by update.
        await call("get lease", "GET", f"{LEASE}/scorer")
        holder = "rbac-check_0"
        await call("create lease", "POST", LEASE, body={
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "scorer"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "acquireTime": now(),
                     "renewTime": now(), "leaseTransitions": 0}})
        lease = await call("get lease", "GET", f"{LEASE}/scorer")
        lease["spec"].update(holderIdentity=holder, renewTime=now())
        await call("update lease", "PUT", f"{LEASE}/scorer", body=lease)
    return calls


@pytest.fixture(scope="session")
def scorer_api_calls(control_plane) -> list[tuple[str, int]]:
    """The exercise, once per session (the first test and the session's last one both need it)."""
    apply_shipped_rbac(control_plane)
    try:
        return asyncio.run(exercise(control_plane))
    finally:  # leave the shared API server as other tests expect it: no extra node, pods or held Lease
        pods = f"/api/v1/namespaces/{NAMESPACE}/pods"
        for path in (f"{pods}/rbac-bound", f"{pods}/rbac-pending", f"/api/v1/nodes/{NODE}", f"{LEASE}/scorer"):
            status, body = control_plane.request("DELETE", path + "?gracePeriodSeconds=0")
            assert status in (200, 202, 404), (path, status, body)


def test_the_service_account_may_make_every_call_of_the_service(scorer_api_calls) -> None:
    assert {what for what, _ in scorer_api_calls} == {
        "bind", "event events.k8s.io", "pods/status", "event core",
        f"patch /apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events", f"patch /api/v1/namespaces/{NAMESPACE}/events",
        *(f"{verb} {resource}" for resource in ("pods", "nodes", "namespaces") for verb in ("list", "watch")),
        "get lease", "create lease", "update lease"}
    for what, status in scorer_api_calls:
        if what == "get lease" and status == 404:
            continue  # no Lease yet: allowed, and the elector creates it
        if what == "create lease" and status == 409:
            continue  # another test's elector made it first
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
