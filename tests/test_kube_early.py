"""The first lists asked for while scorer run's modules load (scorer.kube.early): taken by the reflectors
when they ask the very same thing, dropped otherwise, and no different from the reflectors' own lists."""

from __future__ import annotations

import asyncio
import http.server
import socket
import threading
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from test_config_catalog import full_catalog
from test_kube_reflector import Cluster, Recorder, in_step, pods_reflector, running, until

from scorer.config import load_config
from scorer.kube import early
from scorer.kube.apiresources import RESOURCES
from scorer.kube.client import ApiClient, ApiUnavailable, EarlyApiStream, RestClientMetrics
from scorer.kube.config import AccessChoice
from scorer.kube.listing import DEFAULT_PAGE_SIZE, list_params
from scorer.kube.reflector import Reflector, ReflectorMetrics
from scorer.service.build import resolve_access
from scorer.service.options import ServiceOptions

kube = pytest.mark.kube


def kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    return path


@pytest.mark.parametrize(("argv", "expected"), [
    (["run", "--config", "c.yaml", "--kubeconfig", "k"], ("k", None, "c.yaml")),
    (["run", "--kubeconfig=k", "--context=ctx"], ("k", "ctx", None)),
    (["run", "--context", "ctx", "--config=c.yaml"], (None, "ctx", "c.yaml")),
    (["run", "--kubeconfig"], (None, None, None)),
    (["run", "--kubeconfig", "k", "--help"], None),
    (["run", "-h"], None),
    (["simulate", "--kubeconfig", "k"], None),
    ([], None),
])
def test_only_a_run_command_line_asks_early(argv: list[str], expected: tuple | None) -> None:
    assert early.run_options(argv) == expected


def test_nothing_is_asked_when_the_access_cannot_be_loaded(tmp_path: Path) -> None:
    assert early.start(["run", "--kubeconfig", str(tmp_path / "missing")]) is None
    (tmp_path / "bad").write_text("clusters: 5\n")
    assert early.start(["run", "--kubeconfig", str(tmp_path / "bad")]) is None


def test_the_kubeconfig_a_configuration_file_names_is_asked_early(tmp_path: Path) -> None:
    """kubeadm-style: ``--config`` whose ``clientConnection.kubeconfig`` names the access, no ``--kubeconfig``;
    the early lists use it, and the service's own choice (``resolve_access``) takes them."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    access = kubeconfig(tmp_path, f"http://127.0.0.1:{port}")
    config = tmp_path / "config.yaml"
    config.write_text(f"apiVersion: kubescheduler.config.k8s.io/v1beta1\nkind: KubeSchedulerConfiguration\n"
                      f"clientConnection:\n  kubeconfig: {access}\n")
    lists = early.start(["run", "--config", str(config)])
    assert lists is not None and lists.choice == AccessChoice(str(access))
    options = ServiceOptions(str(config), early_lists=lists)
    taken, kept = resolve_access(options, load_config(str(config), full_catalog()))
    assert kept is lists and taken is lists.access
    lists.discard()
    # --kubeconfig overrides the file, here as in the service
    (tmp_path / "other").mkdir()
    other = kubeconfig(tmp_path / "other", f"http://127.0.0.1:{port}")
    lists = early.start(["run", "--config", str(config), "--kubeconfig", str(other)])
    assert lists is not None and lists.choice == AccessChoice(str(other))
    lists.discard()


@pytest.mark.parametrize("text", ["clientConnection: [1]\n", "clientConnection: {kubeconfig: 5}\n", "- a\n",
                                  "a: [\n", "clientConnection: {kubeconfig: ''}\n"])
def test_a_configuration_naming_no_kubeconfig_leaves_the_default(tmp_path: Path, text: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(text)
    assert early.configured_kubeconfig(str(config)) is None
    assert early.configured_kubeconfig(str(tmp_path / "missing.yaml")) is None


def test_the_early_lists_are_the_reflectors_read_at_one_path() -> None:
    assert sorted(early.FIRST_LISTS) == sorted(r.path for r in RESOURCES.values() if not r.fallback_paths)
    # the resources with fallbacks: each candidate path's list and its group version's discovery document
    candidates = [path for r in RESOURCES.values() if r.fallback_paths for path in (r.path, *r.fallback_paths)]
    assert [lst for _, lst in early.VERSIONED] == candidates
    assert [discovery for discovery, _ in early.VERSIONED] == [path.rpartition("/")[0] for path in candidates]
    assert early.NODE_LISTS == (RESOURCES["nodes"].path,) and early.POD_LISTS == (RESOURCES["pods"].path,)


async def test_an_unreachable_server_leaves_the_list_to_the_reflector(tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    lists = early.start(["run", "--kubeconfig", str(kubeconfig(tmp_path, f"http://127.0.0.1:{port}"))])
    assert lists is not None and lists.choice == AccessChoice(str(tmp_path / "kubeconfig"))
    client = ApiClient(lists.access, early=lists, timeout=2)
    params = list_params(DEFAULT_PAGE_SIZE, from_cache=True)
    with pytest.raises(ApiUnavailable):  # the early answer failed before its head: the client asked itself
        async with client.stream("GET", "/api/v1/pods", params=params, timed=True):
            pass
    assert client.requests == 1 and "/api/v1/pods" not in lists.answers and "/api/v1/nodes" in lists.answers
    await client.close()


def test_one_thread_takes_every_answer_on_one_connection(tmp_path: Path) -> None:
    """The small lists go in turn on one kept-alive connection: answers of known length (what the API server
    sends for a small list) and chunked ones alike, each whole, on one connection."""
    connections: list[tuple[str, int]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            connections.append(self.client_address)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = b'{"kind":"List","items":[{"metadata":{"name":"%s"}}]}' % self.path.encode()
            self.send_response(200)
            if "chunked" in self.path:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
            else:
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        choice = AccessChoice(str(kubeconfig(tmp_path, f"http://127.0.0.1:{server.server_address[1]}")))
        paths = ["/api/v1/a", "/api/v1/chunked", "/api/v1/b", "/api/v1/c"]
        answers = [early.EarlyAnswer(path, {"limit": "5"}) for path in paths]
        early.fetch(answers, choice.load(), None)
        for path, answer in zip(paths, answers, strict=True):
            body, _ = answer.chunks()
            assert answer.status == 200 and body.endswith(b'"%s?limit=5"}}]}' % path.encode()), (path, body)
            assert answer.chunks()[0] == b""  # its end, no error
        assert len(connections) == 1
    finally:
        server.shutdown()
        server.server_close()


async def test_an_answer_cut_in_its_body_is_the_reflectors_failure(tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def answer_then_cut() -> None:
        connection, _ = server.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"ite\r\n")

    thread = threading.Thread(target=answer_then_cut, daemon=True)
    thread.start()
    choice = AccessChoice(str(kubeconfig(tmp_path, f"http://127.0.0.1:{server.getsockname()[1]}")))
    cut = early.EarlyAnswer("/api/v1/nodes", {"limit": "5"})
    lists = early.EarlyLists(choice, choice.load(), {"/api/v1/nodes": cut})
    threading.Thread(target=early.fetch, args=([cut], lists.access, None), daemon=True).start()
    client = ApiClient(lists.access, early=lists, timeout=2)
    async with client.stream("GET", "/api/v1/nodes", params={"limit": "5"}) as stream:
        assert stream.status == 200
        with pytest.raises(ApiUnavailable, match="GET http://127.0.0.1"):
            while await stream.readchunk():
                pass
    assert client.requests == 0
    thread.join(5)
    server.close()
    await client.close()


@kube
async def test_the_reflector_reads_the_early_list_and_watches_from_its_version(control_plane) -> None:
    namespace = "early-list"
    cluster = Cluster(control_plane)
    cluster.namespace(namespace)
    for i in range(5):
        cluster.pod(namespace, f"p{i}")
    lists = early.start(["run", "--kubeconfig", str(control_plane.kubeconfig)])
    assert lists is not None
    assert await EarlyApiStream.wait_head(lists.answers["/api/v1/pods"])
    cluster.pod(namespace, "later")  # made after the early list was answered: the watch brings it
    metrics = RestClientMetrics(CollectorRegistry())
    client = ApiClient(lists.access, early=lists, metrics=metrics)
    reflector, recorder = pods_reflector(client), Recorder()
    async with running(reflector.run(recorder)):
        await asyncio.wait_for(reflector.wait_for_sync(), 15)
        await until(in_step(reflector, cluster, namespace), "the reflector in step with the API")
        assert sorted(key for change, key in recorder.of(namespace) if change == "add") == [
            f"{namespace}/{name}" for name in ("later", "p0", "p1", "p2", "p3", "p4")]
    assert "/api/v1/pods" not in lists.answers  # taken
    assert client.requests == 1  # the watch: the list was the early one
    assert metrics.requests.labels("200", "GET", client._host)._value.get() == 2
    await client.close()


@kube
async def test_every_first_list_is_answered_early(control_plane) -> None:
    """A real API server answers each of the first lists early, the small ones in turn on their one connection."""
    lists = early.start(["run", "--kubeconfig", str(control_plane.kubeconfig)])
    assert lists is not None
    assert sorted(lists.answers) == sorted([*early.FIRST_LISTS, *(path for pair in early.VERSIONED for path in pair)])
    bodies: dict[str, bytes] = {}
    for path, answer in lists.answers.items():
        async with asyncio.timeout(30):
            body = b""
            while (chunk := answer.chunks()[0]) != b"":
                body += chunk or b""
                await asyncio.sleep(0.01)
        bodies[path] = body
        if path in early.FIRST_LISTS:
            assert answer.status == 200 and b'"items":[' in body, (path, answer.status, body[:200])
        else:  # (a group version 1.20 does not serve answers 404)
            assert answer.status in (200, 404), (path, answer.status, body[:200])
    assert b'"poddisruptionbudgets"' in bodies["/apis/policy/v1beta1"]  # (1.20 serves policy/v1beta1)
    lists.discard()


@kube
async def test_a_resource_with_fallbacks_reads_its_discovery_and_list_early(control_plane) -> None:
    """PodDisruptionBudgets: the reflector chooses the version from the early discovery documents and takes
    the early list at that path: it asks for nothing itself but its watch."""
    lists = early.start(["run", "--kubeconfig", str(control_plane.kubeconfig)])
    assert lists is not None
    metrics = RestClientMetrics(CollectorRegistry())
    client = ApiClient(lists.access, early=lists, metrics=metrics)
    reflector = Reflector(client, RESOURCES["poddisruptionbudgets"], metrics=ReflectorMetrics(CollectorRegistry()))
    async with running(reflector.run(Recorder())):
        await asyncio.wait_for(reflector.wait_for_sync(), 15)
    assert reflector.path is not None and reflector.path in {lst for _, lst in early.VERSIONED}
    assert reflector.path not in lists.answers and reflector.path.rpartition("/")[0] not in lists.answers
    assert client.requests == 1  # its watch
    assert metrics.requests.labels("200", "GET", client._host)._value.get() >= 2  # its discovery and list, counted
    await client.close()


@kube
async def test_a_reflector_that_asks_otherwise_lists_itself(control_plane) -> None:
    lists = early.start(["run", "--kubeconfig", str(control_plane.kubeconfig)])
    assert lists is not None
    answer = lists.answers["/api/v1/pods"]
    client = ApiClient(lists.access, early=lists)
    reflector = pods_reflector(client, page_size=7)  # another query than the early one's
    async with running(reflector.run(Recorder())):
        await asyncio.wait_for(reflector.wait_for_sync(), 15)
    assert "/api/v1/pods" not in lists.answers and answer._dropped
    assert client.requests == 2  # its list, and its watch
    await client.close()
    assert lists.answers == {}  # close() drops the answers no reflector took (the nodes')
