"""scorer.kube.config and scorer.kube.ratelimit: kubeconfig, in-cluster configuration, the token bucket."""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
from pathlib import Path

import aiohttp
import pytest
import yaml

from scorer.kube.config import ClusterAccess, KubeConfigError, default_kubeconfig_path, in_cluster, load_kubeconfig
from scorer.kube.ratelimit import TokenBucket


def kubeconfig(tmp_path: Path, *, cluster: dict | None = None, user: dict | None = None,
               current: str | None = "c1", extra_contexts: tuple[dict, ...] = ()) -> Path:
    doc = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "k1", "cluster": cluster if cluster is not None else {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "u1", "user": user if user is not None else {"token": "abc"}}],
        "contexts": [{"name": "c1", "context": {"cluster": "k1", "user": "u1"}}, *extra_contexts],
    }
    if current is not None:
        doc["current-context"] = current
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_current_context_gives_server_and_token(tmp_path: Path) -> None:
    access = load_kubeconfig(kubeconfig(tmp_path))
    assert (access.server, access.token, access.bearer_token()) == ("https://127.0.0.1:6443", "abc", "abc")
    assert access.headers() == {"Authorization": "Bearer abc"}


def test_a_named_context_overrides_the_current_one(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, extra_contexts=({"name": "other", "context": {"cluster": "missing", "user": "u1"}},))
    with pytest.raises(KubeConfigError, match=r'clusters: no entry named "missing" \(there are: "k1"\)'):
        load_kubeconfig(path, context="other")


def test_no_current_context_is_an_error_that_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match="no current context; name one with --context"):
        load_kubeconfig(kubeconfig(tmp_path, current=None))


@pytest.mark.parametrize("plugin", ["exec", "auth-provider"])
def test_credential_plugins_are_refused(tmp_path: Path, plugin: str) -> None:
    path = kubeconfig(tmp_path, user={plugin: {"command": "aws"}})
    with pytest.raises(KubeConfigError, match=rf'users\["u1"\].user.{plugin}: credential plugins \({plugin}\) are '
                                              "not supported by scorer"):
        load_kubeconfig(path)


def test_a_token_file_is_read_again_when_it_rotates(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    access = load_kubeconfig(kubeconfig(tmp_path, user={"tokenFile": "token"}))  # relative to the kubeconfig
    assert access.bearer_token() == "first"
    token.write_text("second-and-longer\n")
    assert access.bearer_token() == "second-and-longer"


def test_inline_certificate_data_becomes_private_files(tmp_path: Path) -> None:
    pem = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    data = base64.b64encode(pem).decode()
    access = load_kubeconfig(kubeconfig(tmp_path, cluster={"server": "https://h:1", "certificate-authority-data": data},
                                        user={"client-certificate-data": data, "client-key-data": data}))
    for path in (access.ca_file, access.client_cert_file, access.client_key_file):
        assert path is not None and Path(path).read_bytes() == pem
        assert os.stat(path).st_mode & 0o077 == 0
        os.unlink(path)


@pytest.mark.parametrize("cluster, user, message", [
    ({"server": "ftp://h"}, {"token": "t"}, r'clusters\["k1"\].cluster.server: "ftp://h" is not an http\(s\) URL'),
    ({}, {"token": "t"}, r'clusters\["k1"\].cluster.server: Required value'),
    ({"server": "https://h", "insecure-skip-tls-verify": "yes"}, {},
     r"insecure-skip-tls-verify: expected a boolean, got string \"yes\""),
    ({"server": "https://h", "certificate-authority": "/no/such/ca"}, {},
     r'certificate-authority: file "/no/such/ca" does not exist'),
    ({"server": "https://h", "certificate-authority-data": "%%%"}, {},
     "certificate-authority-data: is not valid base64"),
    ({"server": "https://h"}, {"token": "t", "tokenFile": "/t"}, "give either token or tokenFile, not both"),
    ({"server": "https://h"}, {"client-certificate-data": "QQ=="}, "client-certificate and client-key go together"),
    ({"server": "https://h"}, {"token": 5}, r'users\["u1"\].user.token: expected a string, got integer 5'),
])
def test_bad_fields_are_errors_with_their_path(tmp_path: Path, cluster: dict, user: dict, message: str) -> None:
    with pytest.raises(KubeConfigError, match=message):
        load_kubeconfig(kubeconfig(tmp_path, cluster=cluster, user=user))


def test_a_missing_or_malformed_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="no such file"):
        load_kubeconfig(tmp_path / "none")
    (tmp_path / "bad").write_text("- a list\n")
    with pytest.raises(KubeConfigError, match="expected a kubeconfig"):
        load_kubeconfig(tmp_path / "bad")


def test_the_default_path_is_the_first_of_KUBECONFIG(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join(["/a/config", "/b/config"]))
    assert default_kubeconfig_path() == "/a/config"
    monkeypatch.delenv("KUBECONFIG")
    assert default_kubeconfig_path().endswith(os.path.join(".kube", "config"))


def test_in_cluster_reads_the_service_account(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_text("ca")
    access = in_cluster({"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}, tmp_path)
    assert access.server == "https://[fd00::1]:443" and access.bearer_token() == "sa-token"
    with pytest.raises(KubeConfigError, match="KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set"):
        in_cluster({}, tmp_path)
    (tmp_path / "token").unlink()
    with pytest.raises(KubeConfigError, match="token does not exist"):
        in_cluster({"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"}, tmp_path)


def test_the_token_bucket_lets_a_burst_through_then_paces_at_qps() -> None:
    now = [0.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    bucket = TokenBucket(qps=10, burst=3, clock=lambda: now[0], sleep=sleep)

    async def take(n: int) -> None:
        for _ in range(n):
            await bucket.acquire()

    asyncio.run(take(3))
    assert slept == []  # the burst
    asyncio.run(take(2))
    assert slept == pytest.approx([0.1, 0.1])  # then one per 1/qps
    now[0] += 1.0  # idle: the bucket refills up to burst, not beyond
    slept.clear()
    asyncio.run(take(4))
    assert slept == pytest.approx([0.1])


def test_a_token_bucket_without_qps_never_waits() -> None:
    async def never(seconds: float) -> None:
        raise AssertionError("slept")

    asyncio.run(TokenBucket(qps=0, burst=0, sleep=never).acquire())


@pytest.mark.kube
async def test_the_kubeconfig_of_a_real_api_server_reaches_it(control_plane) -> None:
    access = load_kubeconfig(control_plane.kubeconfig)
    assert isinstance(access, ClusterAccess) and isinstance(access.ssl_context(), ssl.SSLContext)
    async with aiohttp.ClientSession() as session:
        async with session.get(access.server + "/api/v1/namespaces", headers=access.headers(),
                               ssl=access.ssl_context(), timeout=aiohttp.ClientTimeout(total=10)) as response:
            assert response.status == 200
            names = [item["metadata"]["name"] for item in (await response.json())["items"]]
        assert "default" in names
        async with session.get(access.server + "/api/v1/namespaces", ssl=access.ssl_context(),
                               timeout=aiohttp.ClientTimeout(total=10)) as response:
            assert response.status in (401, 403)  # the token is what lets us in
