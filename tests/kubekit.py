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
* the shipped manifests (``k8s/``) rendered and applied to a control plane.

``scripts/build-kube.sh`` builds kube-apiserver from Debian's ``kubernetes``
source package into a cache outside the repository (the test command runs it
as root when the binary is missing); ``SCORER_KUBE_BIN`` names another
directory holding ``kube-apiserver``.
"""

from __future__ import annotations

import os
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
IDENTITIES = {"admin": TOKEN, "scorer": SCORER_TOKEN}
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


def kube_scheduler_binary() -> str:
    """kube-scheduler v1.20.2's path; skips (fails under CI=true) when it is not built."""
    binary = controlplane.find_binary("kube-scheduler")
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("kube-scheduler is required under CI=true: 'bash scripts/build-kube.sh' builds it",
                        pytrace=False)
        pytest.skip("no kube-scheduler: 'bash scripts/build-kube.sh' builds it (as root)")
    return binary


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

    def __init__(self, workdir: Path, *, extra_args: tuple[str, ...] = (), audit: bool = True) -> None:
        """``audit=False`` leaves the audit log out (benchmarks: it costs a synchronous write per request)."""
        kube_binaries()  # skips (fails under CI=true) before anything starts
        super().__init__(workdir, extra_args=extra_args, audit_policy=AUDIT_POLICY if audit else None,
                         identities=(controlplane.Identity(SCORER_TOKEN, SCORER_USER, SCORER_GROUPS),))

    def start(self) -> ControlPlane:
        super().start()
        return self

    def __enter__(self) -> ControlPlane:
        return self.start()

    def kubeconfig_for(self, identity: str) -> Path:
        """A kubeconfig for ``identity`` (``"admin"`` or ``"scorer"``: see the module docstring)."""
        if identity not in IDENTITIES:
            raise ValueError(f"unknown identity {identity!r}; expected one of {sorted(IDENTITIES)}")
        path = self.workdir / f"kubeconfig-{identity}"
        if not path.exists():
            self.write_kubeconfig(path, IDENTITIES[identity])
        return path

    def audited_requests(self) -> list[AuditedRequest]:
        """Every audited request so far (the log is written before each response is sent)."""
        if not self.audit:
            raise RuntimeError("this ControlPlane was started with audit=False")
        try:
            return parse_audit_log(self.audit_log.read_text())
        except FileNotFoundError:
            return []


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
