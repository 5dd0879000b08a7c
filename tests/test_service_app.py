"""The service application over an in-memory cluster: endpoints, readiness, leadership, stopping.

The same ``Service`` runs against the real API server in tests/test_service_kube.py; here the
cluster source is an ``InMemoryCluster``, so these tests are fast and need no binaries.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging

import pytest
from servicekit import self_signed_certificate

from scorer.assembly import assemble
from scorer.cluster.memory import InMemoryCluster
from scorer.registry import build_registry
from scorer.service import logs
from scorer.service.app import Service
from scorer.service.options import ServiceOptions
from scorer.service.run import ListenError, serve, server_ssl_context
from scorer.tasks import Supervisor
from scorer.testing import make_node, make_pod

# (the service runs on uvloop by default, scorer.service.eventloop: these run on both loops)
pytestmark = pytest.mark.event_loops


class GatedSource:
    """An InMemoryCluster whose initial list is delivered only once ``release()`` is called."""

    def __init__(self, cluster: InMemoryCluster) -> None:
        self.cluster = cluster
        self.gate = asyncio.Event()
        self.delivered = True  # False: the pods waiting to be scheduled are still being delivered after the sync

    def release(self) -> None:
        self.gate.set()

    async def run(self, handlers) -> None:
        await self.gate.wait()
        await self.cluster.run(handlers)

    def has_synced(self) -> bool:
        return self.cluster.has_synced()

    def has_delivered(self) -> bool:
        return self.delivered and self.cluster.has_delivered()

    async def wait_for_sync(self) -> None:
        await self.gate.wait()
        await self.cluster.wait_for_sync()


class FakeElector:
    """A leader elector driven by the test: ``grant()`` makes it lead, ``lose()`` ends its run."""

    def __init__(self) -> None:
        self.leading = asyncio.Event()
        self.ended = asyncio.Event()
        self.released = False
        self.renewed = True

    @property
    def is_leader(self) -> bool:
        return self.leading.is_set() and not self.ended.is_set()

    def grant(self) -> None:
        self.leading.set()

    def lose(self) -> None:
        self.ended.set()

    async def run(self) -> None:
        await self.ended.wait()

    async def wait_until_leader(self) -> None:
        await self.leading.wait()

    async def release(self) -> None:
        self.released = True

    def healthy(self) -> bool:
        return self.renewed

    def state(self) -> str:
        return "leader" if self.is_leader else "standby"


def make_service(pods=5, *, elector=None, gated=False, debug=False, http_timeout=15.0):
    nodes = [make_node(f"node-{i}") for i in range(3)]
    pending = [make_pod(f"pod-{i}", cpu="100m") for i in range(pods)]
    cluster = InMemoryCluster(nodes, pending, [])
    asm = assemble(None, cluster, registry=build_registry(autoload=False))
    source = GatedSource(cluster) if gated else cluster
    options = ServiceOptions(config="", bind_address="127.0.0.1", port=0, enable_debug_endpoints=debug,
                             binding_grace=1.0, shutdown_timeout=5.0, http_timeout=http_timeout)
    return Service(asm, source, options, elector=elector), cluster, source


async def serve_and_probe(service, *, ready=lambda: True, context=None):
    """``serve`` the service; once ``ready()``, GET /livez over a socket (TLS with ``context``) must
    answer 200 ok; then a stop request must end it with exit status 0."""
    listening: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve(service, on_listening=listening))
    port = await asyncio.wait_for(listening, 10)
    await wait_for(ready)
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    writer.write(b"GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    response = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    assert response.startswith(b"HTTP/1.1 200") and response.endswith(b"ok")
    service.request_stop(0, "test")
    assert await asyncio.wait_for(task, 10) == 0


@contextlib.asynccontextmanager
async def serving(service):
    """``serve`` the service; its port; then a stop request must end it with exit status 0."""
    listening: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve(service, on_listening=listening))
    try:
        yield await asyncio.wait_for(listening, 10)
    finally:
        service.request_stop(0, "test")
        assert await asyncio.wait_for(task, 10) == 0


async def wait_for(predicate, timeout=10.0):
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


async def test_schedules_and_serves_metrics_and_probes(aiohttp_client):
    service, cluster, _ = make_service(pods=5)
    client = await aiohttp_client(service.app())
    await wait_for(lambda: not cluster.pending_pods())
    assert cluster.binds == 5
    response = await client.get("/metrics")
    assert response.status == 200
    text = await response.text()
    assert 'scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 5\n' in text
    for path in ("/healthz", "/livez", "/readyz"):
        response = await client.get(path)
        assert (response.status, await response.text()) == (200, "ok")
    response = await client.get("/readyz?verbose")
    body = await response.text()
    assert body.splitlines()[:4] == ["[+]ping ok", "[+]informer-sync ok", "[+]shutdown ok", "readyz check passed"]
    assert (await client.get("/readyz/informer-sync")).status == 200
    assert (await client.get("/readyz/nonsense")).status == 404
    # No internals without --enable-debug-endpoints.
    assert (await client.get("/debug/queue")).status == 404
    assert (await client.get("/configz")).status == 404


async def test_readyz_fails_until_the_caches_synced(aiohttp_client):
    service, cluster, source = make_service(pods=2, gated=True)
    client = await aiohttp_client(service.app())
    response = await client.get("/readyz")
    assert response.status == 503
    body = await response.text()
    assert "[-]informer-sync failed: waiting for the caches to sync" in body
    assert body.rstrip().endswith("readyz check failed")
    response = await client.get("/readyz?exclude=informer-sync")
    assert response.status == 200
    assert (await client.get("/livez")).status == 200  # alive while it syncs
    assert cluster.binds == 0
    source.release()
    await wait_for(lambda: cluster.binds == 2)
    assert (await client.get("/readyz")).status == 200


async def test_readyz_waits_for_the_pods_delivered_after_the_sync(aiohttp_client):
    """The scheduling loop starts at the sync, while the waiting pods of the first list are still being
    delivered; /readyz passes once they all were (kube-scheduler: once its informers synced)."""
    service, cluster, source = make_service(pods=2, gated=True)
    source.delivered = False
    client = await aiohttp_client(service.app())
    source.release()
    await wait_for(lambda: cluster.binds == 2)  # scheduling already
    response = await client.get("/readyz")
    assert response.status == 503
    assert "[-]informer-sync failed: waiting for the caches to sync" in await response.text()
    source.delivered = True
    assert (await client.get("/readyz")).status == 200


async def test_debug_endpoints_when_enabled(aiohttp_client):
    service, cluster, _ = make_service(pods=0, debug=True)
    cluster.apply(make_pod("huge", cpu="100"))  # fits nowhere: stays in the queue
    client = await aiohttp_client(service.app())
    await wait_for(lambda: service.asm.queue.pending_counts()["unschedulable"] == 1)
    queue = json.loads(await (await client.get("/debug/queue")).text())
    assert queue["pending"]["unschedulable"] == 1
    assert queue["pods"][0]["pod"] == "default/huge"
    assert queue["pods"][0]["unschedulablePlugins"] == ["NodeResourcesFit"]
    config = json.loads(await (await client.get("/configz")).text())
    assert config["kind"] == "KubeSchedulerConfiguration"


async def test_standby_does_not_schedule_until_it_leads(aiohttp_client):
    elector = FakeElector()
    service, cluster, _ = make_service(pods=3, elector=elector)
    client = await aiohttp_client(service.app())
    await wait_for(lambda: len(service.asm.queue.pending_pods()) == 3)  # caches warm
    await asyncio.sleep(0.2)
    assert cluster.binds == 0
    assert (await client.get("/readyz")).status == 200  # a standby is ready: it serves health
    verbose = await (await client.get("/healthz?verbose")).text()
    assert "[+]leaderElection ok" in verbose and "[+]leader-election standby" in verbose
    elector.grant()
    await wait_for(lambda: cluster.binds == 3)


async def test_a_standby_counts_no_pending_pod_until_it_leads(aiohttp_client):
    """Its queue holds every pending pod (warm caches), but only the leader's are counted: summed over the
    replicas, each pending pod counts once."""
    elector = FakeElector()
    service, _, _ = make_service(pods=3, elector=elector)
    client = await aiohttp_client(service.app())
    await wait_for(lambda: len(service.asm.queue.pending_pods()) == 3)
    text = await (await client.get("/metrics")).text()
    assert 'scheduler_pending_pods{queue="active"} 0\n' in text
    assert 'scheduler_pending_pods{queue="gated"} 0\n' in text
    elector.grant()  # read before the loop (a task) can take a pod: the queue's own counts
    assert service.asm.metrics.collector_registry.get_sample_value("scheduler_pending_pods", {"queue": "active"}) == 3


async def test_losing_the_lease_stops_scheduling_and_exits_non_zero(aiohttp_client):
    elector = FakeElector()
    service, cluster, _ = make_service(pods=2, elector=elector)
    await aiohttp_client(service.app())
    elector.grant()
    await wait_for(lambda: cluster.binds == 2)
    elector.lose()
    await wait_for(lambda: service.stop_requested.is_set())
    assert service.exit_code == 1
    assert service.leadership_lost
    cluster.apply(make_pod("late", cpu="100m"))
    await asyncio.sleep(0.2)
    assert cluster.binds == 2  # no longer schedules


async def test_serve_listens_stops_on_request_and_releases_the_lease():
    elector = FakeElector()
    elector.grant()
    service, cluster, _ = make_service(pods=2, elector=elector)
    await serve_and_probe(service, ready=lambda: cluster.binds == 2)
    assert elector.released


async def test_serve_reports_a_busy_port():
    service, _, _ = make_service(pods=0)
    blocker = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = blocker.sockets[0].getsockname()[1]
    service.options = ServiceOptions(config="", bind_address="127.0.0.1", port=port, shutdown_timeout=5.0)
    try:
        with pytest.raises(ListenError, match=f"cannot listen on 127.0.0.1:{port}"):
            await serve(service)
    finally:
        blocker.close()


async def test_idle_and_slow_connections_are_closed_after_the_http_timeout():
    service, _, _ = make_service(pods=0, http_timeout=1.0)
    async with serving(service) as port:
        async def closed_by_server(first: bytes, *, answered: bool = False) -> bytes:
            """Open a connection, send ``first`` (``answered``: a whole request, read its answer) and
            nothing more; what the server sent until it closed the connection (at most 15 s)."""
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(first)
                async with asyncio.timeout(15):  # the timeout (1 s) + lingering (2 s) + a wide margin
                    received = b""
                    while chunk := await reader.read(65536):
                        received += chunk
                    return received
            finally:
                writer.close()

        kinds = {
            "silent": b"",
            "request line cut": b"GET /liv",
            "headers cut": b"GET /livez HTTP/1.1\r\nHost: x\r\nUser-Ag",
            "keep-alive, then idle": b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n",
            "body never sent": b"GET /livez HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nab",
        }
        results = await asyncio.gather(*(closed_by_server(data) for data in kinds.values() for _ in range(50)))
    by_kind = dict(zip(kinds, [results[i:i + 50] for i in range(0, len(results), 50)], strict=True))
    assert all(answer == b"" for kind in ("silent", "request line cut", "headers cut") for answer in by_kind[kind])
    assert all(answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"ok")
               for kind in ("keep-alive, then idle", "body never sent") for answer in by_kind[kind])


async def test_a_malformed_request_is_one_warning_line_without_traceback():
    stream = io.StringIO()
    logs.configure("text", stream=stream)
    service, _, _ = make_service(pods=0)
    try:
        async with serving(service) as port:
            async def answer(request: bytes) -> bytes:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(request)
                try:
                    return await asyncio.wait_for(reader.read(), 10)
                finally:
                    writer.close()

            long_url = b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
            long_header = b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 100_000 + b"\r\n\r\n"
            for request in (long_url, long_header, long_url, b"GET /livez HTTP/1.1\r\nBad Header\r\n\r\n"):
                assert (await answer(request)).startswith(b"HTTP/1.0 400 Bad Request")
            assert (await answer(b"GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")).endswith(b"ok")
        lines = stream.getvalue().splitlines()
    finally:
        logging.getLogger().handlers.clear()
        server_logger = logging.getLogger(logs.SERVER_LOGGER)
        for found in list(server_logger.filters):
            server_logger.removeFilter(found)
    bad = [line for line in lines if "bad HTTP request" in line]
    assert not [line for line in lines if "Traceback" in line or " ERROR " in line], lines
    # one line for the first of each kind (LineTooLong, BadHttpMessage); the two repeats counted on flush
    assert len(bad) == 3 and all(" WARNING scorer.http " in line for line in bad), bad
    assert "bad HTTP request from 127.0.0.1, answered 400: Got more than 8190 bytes" in bad[0]
    assert all(len(line) < 600 for line in bad)
    assert "bad HTTP request: LineTooLong: 2 more like this" in bad[-1]


def test_tls_options_need_both_files_and_a_loadable_pair(tmp_path):
    with pytest.raises(ListenError, match="go together"):
        server_ssl_context(ServiceOptions(config="", tls_cert_file="cert.pem"))
    (tmp_path / "c.pem").write_text("not a certificate")
    with pytest.raises(ListenError, match="cannot load the certificate and key"):
        server_ssl_context(ServiceOptions(config="", tls_cert_file=str(tmp_path / "c.pem"),
                                          tls_private_key_file=str(tmp_path / "c.pem")))


async def test_supervisor_restarts_a_crashed_task_and_reports_a_fatal_one():
    fatal = []
    supervisor = Supervisor(fatal.append, initial_backoff=0.01, max_backoff=0.02)
    runs = []

    async def flaky():
        runs.append(1)
        if len(runs) < 3:
            raise RuntimeError("boom")
        await asyncio.Event().wait()

    async def broken():
        raise ValueError("bad")

    supervisor.start("flaky", flaky, restart=True)
    supervisor.start("broken", broken, restart=False)
    await wait_for(lambda: len(runs) == 3 and fatal)
    assert supervisor.restarts == {"flaky": 2}
    assert fatal == ["broken"]
    assert supervisor.failure == "broken: ValueError: bad"
    await supervisor.stop()
    assert all(task.done() for task in supervisor.tasks.values())


def test_log_lines_are_one_line_each_in_text_and_json():
    for fmt in ("text", "json"):
        stream = io.StringIO()
        logs.configure(fmt, stream=stream)
        logger = logging.getLogger("scorer.test")
        try:
            raise RuntimeError("multi\nline")
        except RuntimeError:
            logger.exception("failed for pod %s", "default/a\nb")
        lines = stream.getvalue().splitlines()
        assert len(lines) == 1
        if fmt == "json":
            entry = json.loads(lines[0])
            assert entry["level"] == "ERROR" and entry["logger"] == "scorer.test"
            assert entry["message"] == "failed for pod default/a\nb"
            assert "RuntimeError: multi\nline" in entry["exception"]
        else:
            assert " ERROR scorer.test failed for pod default/a\\nb | Traceback" in lines[0]
    logging.getLogger().handlers.clear()


def test_run_command_line_errors_are_one_line(tmp_path, capsys):
    from scorer.cli import main

    assert main(["run"]) == 2
    assert "--config" in capsys.readouterr().err
    assert main(["run", "--config", str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing.yaml" in err[0] and "no such file" in err[0]
    (tmp_path / "c.yaml").write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    assert main(["run", "--config", str(tmp_path / "c.yaml"), "--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err


async def test_serves_https_with_a_certificate(tmp_path):
    import ssl

    cert, key = self_signed_certificate(tmp_path)
    service, cluster, _ = make_service(pods=0)
    service.options = ServiceOptions(config="", bind_address="127.0.0.1", port=0, tls_cert_file=str(cert),
                                     tls_private_key_file=str(key), shutdown_timeout=5.0)
    context = ssl.create_default_context(cafile=str(cert))
    context.check_hostname = False
    await serve_and_probe(service, context=context)
