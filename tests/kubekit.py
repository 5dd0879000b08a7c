"""A real control plane for tests: etcd and kube-apiserver v1.20.2 on 127.0.0.1.

A thin layer over ``scorer.bench.controlplane`` (which the end-to-end bench
uses too): that module finds the binaries and runs etcd + kube-apiserver.
This one adds what only tests need:

* without kube-apiserver, etcd or openssl the calling test is skipped, or
  failed under ``CI=true`` (``kube_binaries``);
* two identities have a token:
  ``admin`` (``TOKEN``, user ``scorer-test`` in ``system:masters``) may do
  anything; ``kubeconfig`` and ``request()`` use it. ``scorer``
  (``SCORER_TOKEN``) is the shipped Deployment's service account,
  ``system:serviceaccount:scorer-system:scorer``, with the groups the API
  server gives a service account: it may do what the RBAC objects applied to
  the server grant it (nothing until ``k8s/``'s are applied);
  ``kubeconfig_for("scorer")`` is a kubeconfig for it;
* every request except the server's own loopback calls and health checks is
  audited at the ``Metadata`` level into ``audit_log``;
  ``audited_requests()`` reads it back (who, with which user agent, did what
  to which resource, and what the server answered);
* the shipped manifests (``k8s/``) rendered and applied to a control plane;
* CSIStorageCapacities are served (``storage.k8s.io/v1alpha1`` with the
  ``CSIStorageCapacity`` gate; 1.20 serves them only so), unless
  ``storage_capacity=False`` (the 1.20 default, where scorer must do without);
* ``ControllerManager``: kube-controller-manager v1.20.2 with only the
  PersistentVolume controller (``persistentvolume-binder``), which binds
  claims and volumes as in a real cluster; it runs as the controller's own
  service account (``persistent-volume-binder``, ``PV_BINDER_TOKEN``), which
  the API server's bootstrap RBAC grants what that controller needs.

``scripts/build-kube.sh`` builds kube-apiserver from Debian's ``kubernetes``
source package into a cache outside the repository (the test command runs it
as root when the binary is missing); ``SCORER_KUBE_BIN`` names another
directory holding ``kube-apiserver``.
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest

from scorer.bench import controlplane
from scorer.bench.controlplane import CACHE_BIN, INSTALL_HINT, READY_TIMEOUT, TOKEN, ControlPlaneError, free_port

__all__ = ["CACHE_BIN", "INSTALL_HINT", "READY_TIMEOUT", "TOKEN", "free_port"]

SCORER_TOKEN = "scorer-serviceaccount-test-token"
SCORER_NAMESPACE = "scorer-system"
SCORER_USER = f"system:serviceaccount:{SCORER_NAMESPACE}:scorer"
SCORER_GROUPS = ("system:serviceaccounts", f"system:serviceaccounts:{SCORER_NAMESPACE}", "system:authenticated")
# The PersistentVolume controller's own service account: the bootstrap ClusterRoleBinding
# system:controller:persistent-volume-binder grants it what the controller does.
PV_BINDER_TOKEN = "persistent-volume-binder-test-token"
PV_BINDER_USER = "system:serviceaccount:kube-system:persistent-volume-binder"
PV_BINDER_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated")
IDENTITIES = {"admin": TOKEN, "scorer": SCORER_TOKEN, "persistent-volume-binder": PV_BINDER_TOKEN}
# kube-apiserver 1.20 serves CSIStorageCapacity only in storage.k8s.io/v1alpha1, and only with its gate on.
STORAGE_CAPACITY_ARGS = ("--runtime-config=storage.k8s.io/v1alpha1=true", "--feature-gates=CSIStorageCapacity=true")
# Metadata level: who did what to which object, and the answer; no bodies. The server's own loopback
# client and health checks are left out (they are most of the traffic and no test asks about them).
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: ["system:apiserver"]
- level: None
  nonResourceURLs: ["/healthz*", "/livez*", "/readyz*", "/version"]
- level: Metadata
"""


def kube_binaries() -> tuple[str, str, str]:
    """Paths of kube-apiserver, etcd and openssl; skips (fails under CI=true) when one is missing."""
    try:
        found = controlplane.kube_binaries()
    except ControlPlaneError as error:
        if os.environ.get("CI") == "true":
            pytest.fail(f"a real kube-apiserver is required under CI=true but {error}", pytrace=False)
        pytest.skip(f"no real kube-apiserver ({error})")
    return found.apiserver, found.etcd, found.openssl


def scorer_container(deployment: dict[str, Any]) -> dict[str, Any]:
    """The one container (``scorer``) of a shipped Deployment."""
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["scorer"]
    return containers[0]


def _built_binary(name: str) -> str:
    """The path of ``name`` (built by scripts/build-kube.sh); skips (fails under CI=true) when it is not built."""
    binary = controlplane.find_binary(name)
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is required under CI=true: 'bash scripts/build-kube.sh' builds it",
                        pytrace=False)
        pytest.skip(f"no {name}: 'bash scripts/build-kube.sh' builds it (as root)")
    return binary


def kube_scheduler_binary() -> str:
    """kube-scheduler v1.20.2's path; skips (fails under CI=true) when it is not built."""
    return _built_binary("kube-scheduler")


def kube_controller_manager_binary() -> str:
    """kube-controller-manager v1.20.2's path; skips (fails under CI=true) when it is not built."""
    return _built_binary("kube-controller-manager")


@attrs.frozen(slots=True)
class AuditedRequest:
    """One request as the audit log saw it (``api_group`` is ``""`` for the core group)."""

    user: str
    groups: tuple[str, ...]
    user_agent: str
    verb: str
    api_group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int  # the HTTP status answered (0: not answered yet, e.g. a watch still open)
    decision: str  # the authorizer's "allow" or "forbid" ("" when not recorded)
    uri: str

    @property
    def denied(self) -> bool:
        return self.code == 403 or self.decision == "forbid"


def parse_audit_log(text: str) -> list[AuditedRequest]:
    """The requests of an audit log (JSON lines), one per audit ID, in the order they were received.

    A watch is logged when its response starts and again when it ends; the last stage seen wins.
    """
    latest: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        if line.strip():
            event = orjson.loads(line)
            latest[event["auditID"]] = event  # dicts keep the first insertion's position
    requests = []
    for event in latest.values():
        ref = event.get("objectRef") or {}
        user = event.get("user") or {}
        requests.append(AuditedRequest(
            user=user.get("username", ""), groups=tuple(user.get("groups") or ()),
            user_agent=event.get("userAgent", ""), verb=event.get("verb", ""),
            api_group=ref.get("apiGroup", ""), resource=ref.get("resource", ""),
            subresource=ref.get("subresource", ""), namespace=ref.get("namespace", ""), name=ref.get("name", ""),
            code=int((event.get("responseStatus") or {}).get("code", 0)),
            decision=(event.get("annotations") or {}).get("authorization.k8s.io/decision", ""),
            uri=event.get("requestURI", "")))
    return requests


def run_last(test: Any) -> Any:
    """Mark a test to run after every other test of the session (tests/conftest.py reorders them)."""
    test.run_last = True
    return test


class ControlPlane(controlplane.ControlPlane):
    """The package's control plane with the test identities and, unless ``audit=False``, the audit log."""

    def __init__(self, workdir: Path, *, extra_args: tuple[str, ...] = (), audit: bool = True,
                 storage_capacity: bool = True) -> None:
        """``audit=False`` leaves the audit log out (benchmarks: it costs a synchronous write per request);
        ``storage_capacity=False`` leaves CSIStorageCapacities unserved, as a 1.20 server is by default."""
        kube_binaries()  # skips (fails under CI=true) before anything starts
        super().__init__(workdir, extra_args=(*(STORAGE_CAPACITY_ARGS if storage_capacity else ()), *extra_args),
                         audit_policy=AUDIT_POLICY if audit else None,
                         identities=(controlplane.Identity(SCORER_TOKEN, SCORER_USER, SCORER_GROUPS),
                                     controlplane.Identity(PV_BINDER_TOKEN, PV_BINDER_USER, PV_BINDER_GROUPS)))

    def start(self) -> ControlPlane:
        super().start()
        return self

    def __enter__(self) -> ControlPlane:
        return self.start()

    def kubeconfig_for(self, identity: str) -> Path:
        """A kubeconfig for ``identity`` (``"admin"``, ``"scorer"`` or ``"persistent-volume-binder"``: see the
        module docstring)."""
        if identity not in IDENTITIES:
            raise ValueError(f"unknown identity {identity!r}; expected one of {sorted(IDENTITIES)}")
        path = self.workdir / f"kubeconfig-{identity}"
        if not path.exists():
            self.write_kubeconfig(path, IDENTITIES[identity])
        return path

    def compact_etcd(self) -> int:
        """Compact etcd at its current revision (through etcd's JSON gateway, ``/v3/kv/...``); the revision.
        A watch from any older resourceVersion then gets 410 Gone (with ``--watch-cache=false``, watches
        are served by etcd itself)."""
        base = f"http://127.0.0.1:{self._etcd_port}/v3/kv"
        request = urllib.request.Request(f"{base}/range", data=json.dumps({"key": "AA=="}).encode(), method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            revision = int(json.loads(response.read())["header"]["revision"])
        request = urllib.request.Request(f"{base}/compaction", method="POST",
                                         data=json.dumps({"revision": str(revision), "physical": True}).encode())
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
        return revision

    def audited_requests(self) -> list[AuditedRequest]:
        """Every audited request so far (the log is written before each response is sent)."""
        if not self.audit:
            raise RuntimeError("this ControlPlane was started with audit=False")
        try:
            return parse_audit_log(self.audit_log.read_text())
        except FileNotFoundError:
            return []


class ControllerManager(controlplane.ControllerManager):
    """The package's kube-controller-manager runner (by default only the PersistentVolume controller,
    resyncing every second so tests are quick), authenticated as the ``persistent-volume-binder`` service
    account (``plane.kubeconfig_for``), whose bootstrap RBAC grants what that controller does. Skips (fails
    under CI=true) when the binary is not built."""

    def __init__(self, plane: ControlPlane, workdir: Path, *,
                 controllers: tuple[str, ...] = (controlplane.PV_BINDER,), sync_period: str = "1s") -> None:
        super().__init__(kube_controller_manager_binary(), plane.kubeconfig_for("persistent-volume-binder"),
                         workdir, controllers=controllers, sync_period=sync_period)
        self.plane = plane


# --- the shipped manifests (k8s/) and applying objects to a ControlPlane ---

REPO = Path(__file__).resolve().parent.parent
K8S_DIR = REPO / "k8s"
# What render_kustomization understands of a kustomization.yaml; anything else is an error, not ignored.
KUSTOMIZATION_KEYS = {"apiVersion", "kind", "resources", "configMapGenerator", "generatorOptions"}


def render_kustomization(directory: Path = K8S_DIR) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize directory`` gives, for the subset of kustomize k8s/ uses.

    ``resources`` (files), and ``configMapGenerator`` entries with ``files`` (``key=path`` or ``path``)
    under ``generatorOptions`` with ``disableNameSuffixHash: true`` and ``labels``/``annotations``. The
    tests compare this with kubectl's own rendering when kubectl is installed.
    """
    import yaml

    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(kustomization) - KUSTOMIZATION_KEYS
    if unknown:
        raise ValueError(f"{directory}/kustomization.yaml: render_kustomization does not implement {sorted(unknown)}")
    options = kustomization.get("generatorOptions") or {}
    if kustomization.get("configMapGenerator") and options.get("disableNameSuffixHash") is not True:
        raise ValueError("render_kustomization needs generatorOptions.disableNameSuffixHash: true")
    objects: list[dict[str, Any]] = []
    for resource in kustomization.get("resources") or []:
        objects.extend(doc for doc in yaml.safe_load_all((directory / resource).read_text()) if doc)
    for generator in kustomization.get("configMapGenerator") or []:
        if set(generator) - {"name", "namespace", "files"}:
            raise ValueError(f"render_kustomization does not implement {sorted(set(generator))} of a generator")
        data = {}
        for source in generator.get("files") or []:
            key, _, path = source.rpartition("=") if "=" in source else (Path(source).name, "", source)
            data[key] = (directory / path).read_text()
        metadata: dict[str, Any] = {"name": generator["name"]}
        if "namespace" in generator:
            metadata["namespace"] = generator["namespace"]
        for field in ("labels", "annotations"):
            if options.get(field):
                metadata[field] = dict(options[field])
        objects.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data})
    return objects


def find_object(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    """The one object of ``kind`` (and ``name``) among ``objects``."""
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    if len(found) != 1:
        raise LookupError(f"{len(found)} objects of kind {kind} named {name or '(any)'}; expected exactly one")
    return found[0]


def dropped_fields(sent: Any, returned: Any, path: str = "") -> list[str]:
    """Paths of ``sent`` missing from ``returned``: fields the API server pruned as unknown.

    kube-apiserver 1.20 drops unknown fields silently (strict field validation came in 1.25), so a
    misspelt field passes a dry run unless its echo is compared with what was sent. Values are not
    compared (the server normalizes quantities and fills defaults), only the presence of every key
    and the length of every list.
    """
    if isinstance(sent, dict):
        if not isinstance(returned, dict):
            return [path or "."]
        missing = []
        for key, value in sent.items():
            if key not in returned:
                missing.append(f"{path}.{key}")
            else:
                missing.extend(dropped_fields(value, returned[key], f"{path}.{key}"))
        return missing
    if isinstance(sent, list):
        if not isinstance(returned, list) or len(returned) != len(sent):
            return [path]
        pairs = enumerate(zip(sent, returned, strict=True))
        return [m for i, (a, b) in pairs for m in dropped_fields(a, b, f"{path}[{i}]")]
    return []


class Resources:
    """The REST path of an object's collection, from the API server's discovery documents."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self._discovery: dict[str, dict[str, tuple[str, bool]]] = {}

    def _kinds(self, api_version: str) -> dict[str, tuple[str, bool]]:
        if api_version not in self._discovery:
            prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            status, body = self.plane.request("GET", prefix)
            if status != 200:
                raise LookupError(f"GET {prefix}: {status} {body[:200]!r}")
            self._discovery[api_version] = {r["kind"]: (f"{prefix}/{r['name']}", r["namespaced"])
                                            for r in orjson.loads(body)["resources"] if "/" not in r["name"]}
        return self._discovery[api_version]

    def collection(self, obj: dict[str, Any]) -> str:
        kinds = self._kinds(obj["apiVersion"])
        if obj["kind"] not in kinds:
            raise LookupError(f"{obj['apiVersion']} {obj['kind']} is not served")
        path, namespaced = kinds[obj["kind"]]
        if not namespaced:
            return path
        base, _, plural = path.rpartition("/")
        return f"{base}/namespaces/{obj['metadata']['namespace']}/{plural}"

    def apply(self, obj: dict[str, Any], *, dry_run: bool = False) -> tuple[int, dict[str, Any]]:
        """Create ``obj``, or replace it when it exists; returns the final status and the server's object."""
        query = "?dryRun=All" if dry_run else ""
        collection = self.collection(obj)
        status, body = self.plane.request("POST", collection + query, orjson.dumps(obj))
        if status == 409:
            item = f"{collection}/{obj['metadata']['name']}"
            status, body = self.plane.request("GET", item)
            if status != 200:
                raise LookupError(f"GET {item}: {status} {body[:200]!r}")
            replacement = {**obj, "metadata": {**obj["metadata"],
                                               "resourceVersion": orjson.loads(body)["metadata"]["resourceVersion"]}}
            status, body = self.plane.request("PUT", item + query, orjson.dumps(replacement))
        return status, orjson.loads(body) if body else {}


# --- volumes: what the PersistentVolume controller and an external provisioner write ---


def _merge_patch(plane: ControlPlane, path: str, patch: dict[str, Any]) -> dict[str, Any]:
    status, body = plane.request("PATCH", path, orjson.dumps(patch), "application/merge-patch+json")
    if status != 200:
        raise AssertionError(f"PATCH {path}: HTTP {status}: {body[:300]!r}")
    return dict(orjson.loads(body))


def _get(plane: ControlPlane, path: str) -> dict[str, Any]:
    status, body = plane.request("GET", path)
    if status != 200:
        raise AssertionError(f"GET {path}: HTTP {status}: {body[:300]!r}")
    return dict(orjson.loads(body))


def local_volume(name: str, node: str, *, storage_class: str, size: str = "1Gi",
                 claim: dict[str, Any] | None = None, labels: dict[str, str] | None = None,
                 annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A ``local`` PersistentVolume on ``node`` (node affinity ``kubernetes.io/hostname``), bound or
    pre-bound to ``claim`` (an API object: its namespace, name and, when it has one, uid) when given."""
    spec: dict[str, Any] = {
        "capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
        "persistentVolumeReclaimPolicy": "Retain", "local": {"path": f"/mnt/{name}"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}
    if claim is not None:
        meta = claim["metadata"]
        spec["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": meta["namespace"],
                            "name": meta["name"], **({"uid": meta["uid"]} if meta.get("uid") else {})}
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}}, "spec": spec}


def provision_volume(plane: ControlPlane, namespace: str, claim_name: str, node: str, *, name: str,
                     provisioner: str) -> dict[str, Any]:
    """What an external provisioner does for a claim whose ``volume.kubernetes.io/selected-node`` is
    ``node``: create a volume on that node with ``claimRef`` to the claim (its uid) and
    ``pv.kubernetes.io/provisioned-by``; the PersistentVolume controller then binds the two."""
    claim = _get(plane, f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim_name}")
    volume = local_volume(name, node, storage_class=claim["spec"].get("storageClassName") or "",
                          size=claim["spec"]["resources"]["requests"]["storage"], claim=claim,
                          annotations={"pv.kubernetes.io/provisioned-by": provisioner})
    volume["spec"]["persistentVolumeReclaimPolicy"] = "Delete"
    status, body = plane.request("POST", "/api/v1/persistentvolumes", orjson.dumps(volume))
    if status != 201:
        raise AssertionError(f"creating PersistentVolume {name}: HTTP {status}: {body[:300]!r}")
    return dict(orjson.loads(body))


def complete_binding(plane: ControlPlane, volume: str, namespace: str, claim_name: str) -> None:
    """A stand-in for the PersistentVolume controller's ``bind`` where none runs: the volume's claimRef
    (kept when the scheduler set it) and phase Bound; the claim's volumeName, ``bind-completed``
    annotation and phase Bound (reference kube-scheduler.md §10.6.10)."""
    claim = _get(plane, f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim_name}")
    pv = _get(plane, f"/api/v1/persistentvolumes/{volume}")
    if not (pv["spec"].get("claimRef") or {}).get("uid"):
        _merge_patch(plane, f"/api/v1/persistentvolumes/{volume}", {"spec": {"claimRef": {
            "kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": namespace, "name": claim_name,
            "uid": claim["metadata"]["uid"]}}})
    _merge_patch(plane, f"/api/v1/persistentvolumes/{volume}/status", {"status": {"phase": "Bound"}})
    path = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim_name}"
    _merge_patch(plane, path, {"metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                               "spec": {"volumeName": volume}})
    _merge_patch(plane, f"{path}/status", {"status": {"phase": "Bound", "accessModes": pv["spec"]["accessModes"],
                                                      "capacity": pv["spec"]["capacity"]}})


def delete_storage(plane: ControlPlane, path: str) -> None:
    """DELETE a PV or PVC (or any object) and drop its finalizers: no protection controller runs here."""
    plane.request("DELETE", path)
    plane.request("PATCH", path, b'{"metadata": {"finalizers": null}}', "application/merge-patch+json")
