"""A real control plane for tests: etcd and kube-apiserver v1.20.2 on 127.0.0.1.

``scripts/build-kube.sh`` builds kube-apiserver from Debian's ``kubernetes``
source package into a cache outside the repository (the test command runs it
as root when the binary is missing); ``SCORER_KUBE_BIN`` names another
directory holding ``kube-apiserver``. Without the binary, etcd or openssl the
calling test is skipped, or failed under ``CI=true``.

``ControlPlane`` starts etcd with a clean environment (etcd reads every
``ETCD_*`` variable as a flag) and the API server with fresh serving
certificates, a service-account key and a static bearer token, on free
loopback ports; ``kubeconfig`` is a file for clients. There is no
controller-manager, scheduler or kubelet: nodes are plain objects and pods
stay pending until something binds them. Admission plugins that would need a
controller (ServiceAccount, TaintNodesByCondition) are disabled.
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

import pytest

CACHE_BIN = Path(os.environ.get("SCORER_KUBE_CACHE", Path.home() / ".cache/scorer/kube-1.20.2")) / "bin"
INSTALL_HINT = "run 'bash scripts/build-kube.sh' as root (or set SCORER_KUBE_BIN to a directory with kube-apiserver)"
TOKEN = "scorer-test-token"
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


class ControlPlane:
    """etcd + kube-apiserver in ``workdir``; ``start()`` waits for /healthz, ``stop()`` ends both."""

    def __init__(self, workdir: Path, *, extra_args: tuple[str, ...] = ()) -> None:
        self.apiserver_bin, self.etcd_bin, self.openssl_bin = kube_binaries()
        self.workdir = workdir
        self.extra_args = extra_args
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.kubeconfig = workdir / "kubeconfig"
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self) -> ControlPlane:
        w = self.workdir
        (w / "etcd").mkdir(parents=True)
        (w / "certs").mkdir()
        subprocess.run([self.openssl_bin, "genrsa", "-out", str(w / "sa.key"), "2048"], check=True,
                       capture_output=True)
        subprocess.run([self.openssl_bin, "rsa", "-in", str(w / "sa.key"), "-pubout", "-out", str(w / "sa.pub")],
                       check=True, capture_output=True)
        (w / "tokens.csv").write_text(f'{TOKEN},scorer-test,1,"system:masters"\n')
        client, peer = free_port(), free_port()
        etcd_env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD_")}
        self._spawn("etcd", [self.etcd_bin, "--data-dir", str(w / "etcd"),
                             "--listen-client-urls", f"http://127.0.0.1:{client}",
                             "--advertise-client-urls", f"http://127.0.0.1:{client}",
                             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                             "--initial-cluster", f"default=http://127.0.0.1:{peer}"], etcd_env)
        self._spawn("kube-apiserver", [
            self.apiserver_bin, f"--etcd-servers=http://127.0.0.1:{client}", "--bind-address=127.0.0.1",
            f"--secure-port={self.port}", f"--cert-dir={w / 'certs'}", "--advertise-address=127.0.0.1",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={w / 'sa.pub'}", f"--service-account-signing-key-file={w / 'sa.key'}",
            f"--token-auth-file={w / 'tokens.csv'}", "--authorization-mode=AlwaysAllow",
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--service-cluster-ip-range=10.0.0.0/24", *self.extra_args], dict(os.environ))
        self.kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
            f"clusters:\n- name: test\n  cluster: {{server: '{self.url}', insecure-skip-tls-verify: true}}\n"
            f"users:\n- name: test\n  user: {{token: {TOKEN}}}\n"
            "contexts:\n- name: test\n  context: {cluster: test, user: test}\n")
        self._wait_healthy()
        return self

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
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
                content_type: str = "application/json") -> tuple[int, bytes]:
        """One bounded HTTPS request with the test token (for fixtures and assertions)."""
        request = urllib.request.Request(self.url + path, data=body, method=method, headers={
            "Authorization": f"Bearer {TOKEN}", "Content-Type": content_type})
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as error:
            return int(error.code), error.read()

    def stop(self) -> None:
        for proc in reversed(self.processes):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self.processes):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.processes.clear()

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
