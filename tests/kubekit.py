"""A real control plane for tests: etcd and kube-apiserver v1.20.2 on 127.0.0.1.

``scripts/build-kube.sh`` builds kube-apiserver from Debian's ``kubernetes``
source package into a cache outside the repository (the test command runs it
as root when the binary is missing); ``SCORER_KUBE_BIN`` names another
directory holding ``kube-apiserver``. Without the binary, etcd or openssl the
calling test is skipped, or failed under ``CI=true``.

``ControlPlane`` starts etcd with a clean environment (etcd reads every
``ETCD_*`` variable as a flag) and the API server with fresh serving
certificates, a service-account key and static bearer tokens, on free
loopback ports; ``kubeconfig`` is a file for clients. There is no
controller-manager, scheduler or kubelet: nodes are plain objects and pods
stay pending until something binds them. Admission plugins that would need a
controller (ServiceAccount, TaintNodesByCondition) are disabled.

Authorization is RBAC, as in a real cluster. Two identities have a token:

* ``admin`` (``TOKEN``, user ``scorer-test`` in ``system:masters``): may do
  anything; ``kubeconfig`` and ``request()`` use it.
* ``scorer`` (``SCORER_TOKEN``): the shipped Deployment's service account,
  ``system:serviceaccount:scorer-system:scorer``, with the groups the API
  server gives a service account. It may do what the RBAC objects applied to
  the server grant it (nothing until ``k8s/``'s are applied):
  ``kubeconfig_for("scorer")`` is a kubeconfig for it.

Every request except the server's own loopback calls and health checks is
audited at the ``Metadata`` level into ``audit_log``; ``audited_requests()``
reads it back (who, with which user agent, did what to which resource, and
what the server answered).
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest

CACHE_BIN = Path(os.environ.get("SCORER_KUBE_CACHE", Path.home() / ".cache/scorer/kube-1.20.2")) / "bin"
INSTALL_HINT = "run 'bash scripts/build-kube.sh' as root (or set SCORER_KUBE_BIN to a directory with kube-apiserver)"
TOKEN = "scorer-test-token"
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
READY_TIMEOUT = 90.0  # seconds for /healthz; about 10 s on 2 cores


def kube_binaries() -> tuple[str, str, str]:
    """Paths of kube-apiserver, etcd and openssl; skips (fails under CI=true) when one is missing."""
    bin_dir = Path(os.environ.get("SCORER_KUBE_BIN", CACHE_BIN))
    apiserver = bin_dir / "kube-apiserver"
    etcd, openssl = shutil.which("etcd"), shutil.which("openssl")
    missing = [name for name, path in (("kube-apiserver", apiserver if apiserver.is_file() else None),
                                       ("etcd", etcd), ("openssl", openssl)) if path is None]
    if missing:
        problem = f"{', '.join(missing)} not found"
        if os.environ.get("CI") == "true":
            pytest.fail(f"a real kube-apiserver is required under CI=true but {problem}: {INSTALL_HINT}",
                        pytrace=False)
        pytest.skip(f"no real kube-apiserver ({problem}): {INSTALL_HINT}")
    assert etcd is not None and openssl is not None
    return str(apiserver), etcd, openssl


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


class ControlPlane:
    """etcd + kube-apiserver in ``workdir``; ``start()`` waits for /healthz, ``stop()`` ends both."""

    def __init__(self, workdir: Path, *, extra_args: tuple[str, ...] = (), audit: bool = True) -> None:
        """``audit=False`` leaves the audit log out (benchmarks: it costs a synchronous write per request)."""
        self.apiserver_bin, self.etcd_bin, self.openssl_bin = kube_binaries()
        self.workdir = workdir
        self.extra_args = extra_args
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.kubeconfig = workdir / "kubeconfig"
        self.audit_log = workdir / "audit.log"
        self.audit = audit
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self) -> ControlPlane:
        w = self.workdir
        (w / "etcd").mkdir(parents=True)
        (w / "certs").mkdir()
        subprocess.run([self.openssl_bin, "genrsa", "-out", str(w / "sa.key"), "2048"], check=True,
                       capture_output=True)
        subprocess.run([self.openssl_bin, "rsa", "-in", str(w / "sa.key"), "-pubout", "-out", str(w / "sa.pub")],
                       check=True, capture_output=True)
        (w / "tokens.csv").write_text(f'{TOKEN},scorer-test,1,"system:masters"\n'
                                      f'{SCORER_TOKEN},{SCORER_USER},2,"{",".join(SCORER_GROUPS)}"\n')
        (w / "audit-policy.yaml").write_text(AUDIT_POLICY)
        client, peer = free_port(), free_port()
        etcd_env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD_")}
        self._spawn("etcd", [self.etcd_bin, "--data-dir", str(w / "etcd"),
                             "--listen-client-urls", f"http://127.0.0.1:{client}",
                             "--advertise-client-urls", f"http://127.0.0.1:{client}",
                             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                             "--initial-cluster", f"default=http://127.0.0.1:{peer}"], etcd_env)
        self._etcd_port = client
        self._spawn("kube-apiserver", self.apiserver_argv(client), dict(os.environ))
        self._write_kubeconfig(self.kubeconfig, TOKEN)
        self._wait_healthy()
        return self

    def stop_apiserver(self) -> None:
        """Stop kube-apiserver (etcd keeps running with the data): clients see connections refused."""
        _end(self.processes.pop())

    def start_apiserver(self) -> None:
        """Start kube-apiserver again on the same port, over the same etcd; waits for /healthz."""
        self._spawn("kube-apiserver", self.apiserver_argv(self._etcd_port), dict(os.environ))
        self._wait_healthy()

    def apiserver_argv(self, etcd_port: int) -> list[str]:
        w = self.workdir
        return [
            self.apiserver_bin, f"--etcd-servers=http://127.0.0.1:{etcd_port}", "--bind-address=127.0.0.1",
            f"--secure-port={self.port}", f"--cert-dir={w / 'certs'}", "--advertise-address=127.0.0.1",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={w / 'sa.pub'}", f"--service-account-signing-key-file={w / 'sa.key'}",
            f"--token-auth-file={w / 'tokens.csv'}", "--authorization-mode=RBAC",
            *((f"--audit-policy-file={w / 'audit-policy.yaml'}", f"--audit-log-path={self.audit_log}",
               "--audit-log-mode=blocking") if self.audit else ()),
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--service-cluster-ip-range=10.0.0.0/24", *self.extra_args]

    def _write_kubeconfig(self, path: Path, token: str) -> None:
        path.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
            f"clusters:\n- name: test\n  cluster: {{server: '{self.url}', insecure-skip-tls-verify: true}}\n"
            f"users:\n- name: test\n  user: {{token: {token}}}\n"
            "contexts:\n- name: test\n  context: {cluster: test, user: test}\n")

    def kubeconfig_for(self, identity: str) -> Path:
        """A kubeconfig for ``identity`` (``"admin"`` or ``"scorer"``: see the module docstring)."""
        if identity not in IDENTITIES:
            raise ValueError(f"unknown identity {identity!r}; expected one of {sorted(IDENTITIES)}")
        path = self.workdir / f"kubeconfig-{identity}"
        if not path.exists():
            self._write_kubeconfig(path, IDENTITIES[identity])
        return path

    def audited_requests(self) -> list[AuditedRequest]:
        """Every audited request so far (the log is written before each response is sent)."""
        if not self.audit:
            raise RuntimeError("this ControlPlane was started with audit=False")
        try:
            return parse_audit_log(self.audit_log.read_text())
        except FileNotFoundError:
            return []

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        self.processes.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                               stdin=subprocess.DEVNULL))
        log.close()

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            for proc in self.processes:
                if proc.poll() is not None:
                    self.stop()
                    raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}: {self.log_tail()}")
            try:
                status, body = self.request("GET", "/healthz")
                if status == 200 and body == b"ok":
                    return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"kube-apiserver not healthy within {READY_TIMEOUT}s: {self.log_tail()}")

    def log_tail(self, lines: int = 15) -> str:
        out = []
        for name in ("etcd", "kube-apiserver"):
            path = self.workdir / f"{name}.log"
            if path.exists():
                out.append(f"--- {name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(out)

    def request(self, method: str, path: str, body: bytes | None = None,
                content_type: str = "application/json", *, token: str = TOKEN) -> tuple[int, bytes]:
        """One bounded HTTPS request with the admin token, or ``token`` (for fixtures and assertions)."""
        request = urllib.request.Request(self.url + path, data=body, method=method, headers={
            "Authorization": f"Bearer {token}", "Content-Type": content_type})
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as error:
            return int(error.code), error.read()

    def stop(self) -> None:
        """The API server first, then etcd: an API server that loses etcd first retries it until killed."""
        while self.processes:
            _end(self.processes.pop())

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


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


def _end(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 15 s."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
