"""Shared fixtures. Each test gets a fresh plugin registry (never a global one)."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from scorer.registry import build_registry


@pytest.fixture
def registry():
    """Built-in plugins only: tests must not depend on what else is installed."""
    return build_registry(autoload=False)


@pytest.fixture
def catalog(registry):
    return registry.catalog()


# --- event loops: a module marked ``event_loops`` runs its async tests on both (scorer.service.eventloop) ---


def pytest_asyncio_loop_factories(config, item):
    """asyncio's loop for every async test; uvloop's too for those marked ``event_loops`` (the service's
    transports, TLS and timers: what differs between the two)."""
    if item.get_closest_marker("event_loops") is None:
        return {"asyncio": asyncio.new_event_loop}
    return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


# --- real Prometheus (tests/promkit.py); tests using these are marked @pytest.mark.prometheus ---


@pytest.fixture(scope="session")
def prometheus_bin():
    """Path of the prometheus binary; skips (or fails under CI=true) when it is not installed."""
    from promkit import prometheus_binary

    return prometheus_binary()


@pytest.fixture
def exporter():
    """A started promkit.Exporter on 127.0.0.1 (no series yet)."""
    from promkit import Exporter

    with Exporter() as exp:
        yield exp


@pytest.fixture
def prometheus(prometheus_bin, exporter, tmp_path):
    """A real Prometheus scraping `exporter` every 1s (honor_labels: the exporter's labels are kept).

    Ready to answer queries when yielded, but the first scrape lands ~5 s later (Prometheus applies
    targets on a 5 s tick): use `prometheus.wait_for_series(...)` or `prometheus.wait_for_scrape()`.
    """
    from promkit import PrometheusServer

    with PrometheusServer(
        prometheus_bin, [exporter.target], scrape_interval="1s", data_dir=tmp_path / "prom", honor_labels=True
    ) as server:
        yield server


# --- real etcd + kube-apiserver (tests/kubekit.py); tests using it are marked @pytest.mark.kube ---


def pytest_collection_modifyitems(config, items):
    """Tests decorated with ``kubekit.run_last`` run after all others: they read what the session did
    (the API server's audit log of every test's requests)."""
    last = [item for item in items if getattr(getattr(item, "function", None), "run_last", False)]
    if last:
        items[:] = [item for item in items if item not in last] + last


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory):
    """A started kubekit.ControlPlane shared by the session; skips (or fails under CI=true) without one."""
    from kubekit import ControlPlane

    with ControlPlane(tmp_path_factory.mktemp("control-plane")) as plane:
        yield plane


@pytest.fixture(scope="module")
def plane(request, tmp_path_factory):
    """A control plane of the test module's own (nodes are cluster-wide: a shared one would mix other
    modules' nodes in). A module sets ``PLANE_ARGS`` (extra kube-apiserver arguments) to change it."""
    from kubekit import ControlPlane

    name = request.module.__name__.rpartition(".")[2]
    with ControlPlane(tmp_path_factory.mktemp(f"{name}-plane"),
                      extra_args=tuple(getattr(request.module, "PLANE_ARGS", ()))) as control_plane:
        yield control_plane


@pytest.fixture
def cluster(plane):
    """The module's control plane through ``servicekit.Cluster``; the nodes a test made are deleted after it."""
    from servicekit import Cluster

    api = Cluster(plane)
    yield api
    api.delete_all_nodes()


@pytest.fixture
def scorers():
    """``servicekit.ScorerProcess``es a test started (append them): stopped after it."""
    started = []
    yield started
    for proc in started:
        proc.stop()


@pytest.fixture
def proxy(plane):
    """A ``servicekit.ThreadedFaultProxy`` in front of the module's control plane."""
    from servicekit import ThreadedFaultProxy

    threaded = ThreadedFaultProxy(plane.url)
    yield threaded
    threaded.close()


# --- scorer bench with no point measured --------------------------------------------------------------


@pytest.fixture
def e2e_calls(monkeypatch):
    """``scorer bench`` with every point unmeasured: end-to-end points are recorded here as
    ``(setup, spec, keyword arguments)`` and fail "not measured in this test"; in-process points fail
    "skipped in this test"."""
    from scorer.bench import command, e2e
    from scorer.bench.runner import error_point

    calls = []

    def fake_point(setup, spec, **kw):
        calls.append((setup, spec, kw))
        return error_point(spec, "default", "not measured in this test")

    monkeypatch.setattr(e2e, "e2e_available", lambda: None)
    monkeypatch.setattr(e2e, "run_e2e_point", fake_point)
    monkeypatch.setattr(command, "run_point_isolated",
                        lambda source, spec, **kw: error_point(spec, kw["profile"], "skipped in this test"))
    return calls
