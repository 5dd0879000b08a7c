"""A real control plane on 127.0.0.1: etcd and kube-apiserver v1.20.2, for the end-to-end bench and the tests.

``scorer bench --e2e`` runs a scheduler process against it; the test suite's
``tests/kubekit.py`` is a thin layer over this module (it skips a test, or
fails it under ``CI=true``, when a binary is missing, and reads the audit log).
It lives in the package so an installed scorer can run the bench without the
repository's tests directory.

Binaries: ``scripts/build-kube.sh`` builds kube-apiserver (and kube-scheduler)
v1.20.2 from Debian's ``kubernetes`` source package into a cache outside the
repository. Each binary is looked up in ``SCORER_KUBE_BIN`` when it is set,
else in the cache (``SCORER_KUBE_CACHE``, default
``~/.cache/scorer/kube-1.20.2``, its ``bin``), else on ``PATH``; etcd and
openssl likewise, then on ``PATH``.

``ControlPlane`` starts etcd with a clean environment (etcd reads every
``ETCD_*`` variable as a flag) and the API server with fresh serving
certificates, a service-account key and static bearer tokens, on free
loopback ports; ``kubeconfig`` is an admin kubeconfig for clients. There is no
scheduler or kubelet: nodes are plain objects and pods stay pending until
something binds them. ``ControllerManager`` runs kube-controller-manager with
chosen controllers only (the volume workloads and tests run its PersistentVolume
binder, which completes the bindings VolumeBinding starts). Admission plugins that would need a
controller (ServiceAccount, TaintNodesByCondition) are disabled. Every wait is
bounded; ``stop()`` ends both processes (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import functools
import os
import random
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from scorer.errors import ScorerError

KUBE_VERSION = "v1.20.2"
CACHE_BIN = Path(os.environ.get("SCORER_KUBE_CACHE", Path.home() / ".cache/scorer/kube-1.20.2")) / "bin"
INSTALL_HINT = ("run 'bash scripts/build-kube.sh' as root (or set SCORER_KUBE_BIN to a directory with "
                "kube-apiserver)")
TOKEN = "scorer-test-token"  # the admin's bearer token (user scorer-test in system:masters)
ADMIN_USER = "scorer-test"
READY_TIMEOUT = 90.0  # seconds for /healthz; about 10 s on 2 cores
CONTROLLER_READY_TIMEOUT = 60.0  # seconds for kube-controller-manager's /healthz
PV_BINDER = "persistentvolume-binder"
# The controller's client rate (its default, 20/s with bursts of 30, gives a thousand new volumes their
# phase in about a minute and binds a few claims a second): as unthrottled as the schedulers' clients.
CONTROLLER_QPS = 5000


@functools.cache
def _unverified_context() -> ssl.SSLContext:
    """TLS without verification (the server's certificate is self-signed): no CA store to load; one
    context shared by every ``request()`` (loading one per request cost ~60 ms)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context
STOP_GRACE = 15.0  # seconds between SIGTERM and SIGKILL


class ControlPlaneError(ScorerError):
    """A binary is missing, or etcd or kube-apiserver did not start (the message says which and why)."""


@attrs.frozen(slots=True)
class KubeBinaries:
    """Where the control plane's programs are; ``scheduler`` is None when kube-scheduler is not built."""

    apiserver: str
    etcd: str
    openssl: str
    scheduler: str | None


def find_binary(name: str) -> str | None:
    """``name`` in ``SCORER_KUBE_BIN`` when set, else in the build cache, else on ``PATH``."""
    override = os.environ.get("SCORER_KUBE_BIN")
    for directory in ([Path(override)] if override else [CACHE_BIN]):
        candidate = directory / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)


def kube_binaries() -> KubeBinaries:
    """The control plane's binaries; raises ControlPlaneError naming the missing ones."""
    found = {name: find_binary(name) for name in ("kube-apiserver", "etcd", "openssl")}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise ControlPlaneError(f"{', '.join(missing)} not found: {INSTALL_HINT}")
    return KubeBinaries(apiserver=str(found["kube-apiserver"]), etcd=str(found["etcd"]),
                        openssl=str(found["openssl"]), scheduler=find_binary("kube-scheduler"))


#: Where the kernel's local ports of outgoing connections start when /proc does not say (Linux's default).
EPHEMERAL_LOW = 32768
#: How many ports below the ephemeral range ``free_port`` picks from.
PORTS_BELOW_EPHEMERAL = 12000
_RANDOM = random.SystemRandom()


def ephemeral_low(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> int:
    """The first port of the kernel's range for the local ports of outgoing connections."""
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return EPHEMERAL_LOW


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now, picked below the kernel's ephemeral range: a port the kernel
    hands out (binding port 0) is in that range, where every outgoing connection also takes its local port,
    so one of the API server's connections to etcd could take it before the process meant to listen there
    starts ("address already in use"). From the ephemeral range when none below it is free."""
    high = ephemeral_low()
    low = max(1024, high - PORTS_BELOW_EPHEMERAL)
    for _ in range(64 if high > low else 0):
        port = _RANDOM.randrange(low, high)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tmpfs_dir() -> str | None:
    """``/dev/shm`` when it is writable (etcd's fsyncs cost nothing there), else None (the default tmp)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def end_process(proc: subprocess.Popen[bytes], grace: float = STOP_GRACE) -> int:
    """SIGTERM, then SIGKILL after ``grace`` seconds; returns the exit code."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=grace)
    return int(proc.returncode)


@attrs.frozen(slots=True)
class Identity:
    """A static bearer token the API server accepts, the user it stands for and that user's groups."""

    token: str
    user: str
    groups: tuple[str, ...] = ()


ADMIN = Identity(TOKEN, ADMIN_USER, ("system:masters",))


class ControlPlane:
    """etcd + kube-apiserver in ``workdir``; ``start()`` waits for /healthz, ``stop()`` ends both.

    ``identities`` are the tokens the API server accepts besides the admin's;
    ``audit_policy`` (a policy's YAML) makes it write ``audit_log`` (each
    request before its response; benchmarks leave it out: it costs a
    synchronous write per request); ``extra_args`` go to kube-apiserver.
    """

    def __init__(self, workdir: Path, *, binaries: KubeBinaries | None = None, extra_args: Sequence[str] = (),
                 identities: Sequence[Identity] = (), audit_policy: str | None = None) -> None:
        found = binaries or kube_binaries()
        self.apiserver_bin, self.etcd_bin, self.openssl_bin = found.apiserver, found.etcd, found.openssl
        self.workdir = workdir
        self.extra_args = tuple(extra_args)
        self.identities = (ADMIN, *identities)
        self.audit_policy = audit_policy
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.kubeconfig = workdir / "kubeconfig"
        self.audit_log = workdir / "audit.log"
        self.processes: list[subprocess.Popen[bytes]] = []
        self._etcd_port = 0

    @property
    def audit(self) -> bool:
        return self.audit_policy is not None

    def start(self) -> ControlPlane:
        try:
            self._prepare()
            self._etcd_port = free_port()
            self._spawn("etcd", self.etcd_argv(self._etcd_port), self.etcd_env())
            self._spawn("kube-apiserver", self.apiserver_argv(self._etcd_port), dict(os.environ))
            self.write_kubeconfig(self.kubeconfig, TOKEN)
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _prepare(self) -> None:
        w = self.workdir
        (w / "etcd").mkdir(parents=True)
        (w / "certs").mkdir()
        try:
            subprocess.run([self.openssl_bin, "genrsa", "-out", str(w / "sa.key"), "2048"], check=True,
                           capture_output=True, timeout=60)
            subprocess.run([self.openssl_bin, "rsa", "-in", str(w / "sa.key"), "-pubout", "-out", str(w / "sa.pub")],
                           check=True, capture_output=True, timeout=60)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
            raise ControlPlaneError(f"openssl could not make the service-account key: {error}") from error
        (w / "tokens.csv").write_text("".join(f'{i.token},{i.user},{n},"{",".join(i.groups)}"\n'
                                              for n, i in enumerate(self.identities, 1)))
        if self.audit_policy is not None:
            (w / "audit-policy.yaml").write_text(self.audit_policy)

    def etcd_env(self) -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if not k.startswith("ETCD_")}

    def etcd_argv(self, client: int) -> list[str]:
        peer = free_port()
        return [self.etcd_bin, "--data-dir", str(self.workdir / "etcd"),
                "--listen-client-urls", f"http://127.0.0.1:{client}",
                "--advertise-client-urls", f"http://127.0.0.1:{client}",
                "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-cluster", f"default=http://127.0.0.1:{peer}"]

    def apiserver_argv(self, etcd_port: int) -> list[str]:
        w = self.workdir
        audit = ((f"--audit-policy-file={w / 'audit-policy.yaml'}", f"--audit-log-path={self.audit_log}",
                  "--audit-log-mode=blocking") if self.audit else ())
        return [
            self.apiserver_bin, f"--etcd-servers=http://127.0.0.1:{etcd_port}", "--bind-address=127.0.0.1",
            f"--secure-port={self.port}", f"--cert-dir={w / 'certs'}", "--advertise-address=127.0.0.1",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={w / 'sa.pub'}", f"--service-account-signing-key-file={w / 'sa.key'}",
            f"--token-auth-file={w / 'tokens.csv'}", "--authorization-mode=RBAC", *audit,
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--service-cluster-ip-range=10.0.0.0/24", *self.extra_args]

    def stop_apiserver(self) -> None:
        """Stop kube-apiserver (etcd keeps running with the data): clients see connections refused."""
        end_process(self.processes.pop())

    def start_apiserver(self) -> None:
        """Start kube-apiserver again on the same port, over the same etcd; waits for /healthz."""
        self._spawn("kube-apiserver", self.apiserver_argv(self._etcd_port), dict(os.environ))
        self._wait_healthy()

    def write_kubeconfig(self, path: Path, token: str) -> None:
        """A kubeconfig for this API server with ``token`` (TLS not verified: the certificate is self-signed)."""
        path.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
            f"clusters:\n- name: test\n  cluster: {{server: '{self.url}', insecure-skip-tls-verify: true}}\n"
            f"users:\n- name: test\n  user: {{token: {token}}}\n"
            "contexts:\n- name: test\n  context: {cluster: test, user: test}\n")

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        with open(self.workdir / f"{name}.log", "ab") as log:
            try:
                proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL)
            except OSError as error:
                raise ControlPlaneError(f"cannot run {argv[0]}: {error}") from error
        self.processes.append(proc)

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            for name, proc in zip(("etcd", "kube-apiserver"), self.processes, strict=False):
                if proc.poll() is not None:
                    raise ControlPlaneError(f"{name} exited with {proc.returncode}: {self.log_tail()}")
            try:
                status, body = self.request("GET", "/healthz")
                if status == 200 and body == b"ok":
                    return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.5)
        raise ControlPlaneError(f"kube-apiserver not healthy within {READY_TIMEOUT:.0f} s: {self.log_tail()}")

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of etcd's and kube-apiserver's logs."""
        out = []
        for name in ("etcd", "kube-apiserver"):
            path = self.workdir / f"{name}.log"
            if path.exists():
                out.append(f"--- {name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(out)

    def request(self, method: str, path: str, body: bytes | None = None,
                content_type: str = "application/json", *, token: str = TOKEN) -> tuple[int, bytes]:
        """One bounded HTTPS request with the admin token, or ``token``; returns (status, body)."""
        request = urllib.request.Request(self.url + path, data=body, method=method, headers={
            "Authorization": f"Bearer {token}", "Content-Type": content_type})
        try:
            with urllib.request.urlopen(request, timeout=10, context=_unverified_context()) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as error:
            return int(error.code), error.read()

    def stop(self) -> None:
        """The API server first, then etcd: an API server that loses etcd first retries it until killed."""
        while self.processes:
            end_process(self.processes.pop())

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class ControllerManager:
    """kube-controller-manager v1.20.2 against an API server (``kubeconfig``) running only ``controllers``
    (by default the PersistentVolume binder, resyncing every ``sync_period``), its client limited to
    ``qps`` requests a second (and as many in a burst).

    No leader election, no HTTPS (``--secure-port=0``); its health on a free loopback port (1.20's insecure
    ``--port``, deprecated but the only way to see it is up without certificates). ``start()`` waits
    (bounded) for ``/healthz``; ``stop()`` ends it. Its output is in ``workdir``.
    """

    def __init__(self, binary: str, kubeconfig: Path, workdir: Path, *, controllers: Sequence[str] = (PV_BINDER,),
                 sync_period: str = "1s", qps: int = CONTROLLER_QPS) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.controllers = tuple(controllers)
        self.sync_period = sync_period
        self.qps = qps
        self.port = free_port()
        self.log_path = workdir / "kube-controller-manager.log"
        self.process: subprocess.Popen[bytes] | None = None

    def argv(self) -> list[str]:
        return [self.binary, f"--kubeconfig={self.kubeconfig}", f"--controllers={','.join(self.controllers)}",
                "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0", "--address=127.0.0.1",
                f"--port={self.port}", f"--pvclaimbinder-sync-period={self.sync_period}",
                f"--kube-api-qps={self.qps}", f"--kube-api-burst={self.qps}", "--v=2"]

    def start(self) -> ControllerManager:
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            try:
                self.process = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL)
            except OSError as error:
                raise ControlPlaneError(f"cannot run {self.binary}: {error}") from error
        deadline = time.monotonic() + CONTROLLER_READY_TIMEOUT
        try:
            while not self.healthy():
                if self.process.poll() is not None:
                    raise ControlPlaneError(f"kube-controller-manager exited with {self.process.returncode}: "
                                            f"{self.log_tail()}")
                if time.monotonic() > deadline:
                    raise ControlPlaneError(f"kube-controller-manager not healthy within "
                                            f"{CONTROLLER_READY_TIMEOUT:.0f} s: {self.log_tail()}")
                time.sleep(0.3)
        except BaseException:
            self.stop()
            raise
        return self

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no output)"

    def stop(self) -> None:
        if self.process is not None:
            end_process(self.process)
            self.process = None

    def __enter__(self) -> ControllerManager:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
