"""DefaultBinder: binds through the handle's binder (the in-memory cluster here); a refusal for good
is a conflict status, other reported failures plain errors."""

from __future__ import annotations

import asyncio

import pytest

from scorer.cluster.memory import InMemoryCluster
from scorer.errors import BindConflict
from scorer.framework import Code, CycleState, Status
from scorer.framework.catalog import PluginRegistry
from scorer.kube.client import ApiUnavailable
from scorer.plugins import defaultbinder
from scorer.plugins.defaultbinder import DefaultBinder, bind_conflict, is_bind_conflict
from scorer.testing import make_handle, make_node, make_pod


def test_default_binder_binds_in_memory():
    node = make_node("n1")
    pod = make_pod("p")
    cluster = InMemoryCluster([node], [pod], [])
    binder = DefaultBinder(cluster)
    assert asyncio.run(binder.bind(CycleState(), pod, "n1")) is None
    assert cluster.pods[pod.key].node_name == "n1"
    status = asyncio.run(DefaultBinder(None).bind(CycleState(), pod, "n1"))
    assert status.code == Code.ERROR


def test_registration_builds_with_the_handles_binder():
    registry = PluginRegistry()
    defaultbinder.register(registry)
    info = registry.plugins["DefaultBinder"]
    assert info.extension_points == frozenset({"bind"})
    assert info.args_type is None
    pod = make_pod("p")
    cluster = InMemoryCluster([make_node("n1")], [pod], [])
    handle = make_handle()
    handle.binder = cluster
    plugin = info.factory(None, handle)
    assert asyncio.run(plugin.bind(CycleState(), pod, "n1")) is None
    assert cluster.pods[pod.key].node_name == "n1"


class Refusing:
    def __init__(self, exc):
        self.exc = exc

    async def bind(self, pod, node_name):
        raise self.exc


def test_a_conflict_is_an_error_status_the_binding_cycle_recognises():
    pod = make_pod("p")
    status = asyncio.run(DefaultBinder(Refusing(BindConflict("binding default/p to n1: 409: Conflict")))
                         .bind(CycleState(), pod, "n1"))
    assert status.code == Code.ERROR and is_bind_conflict(status)
    assert (status.message(), status.plugin) == ("binding default/p to n1: 409: Conflict", "DefaultBinder")
    assert is_bind_conflict(status.with_plugin("Other"))  # the marker survives the framework's renaming
    assert is_bind_conflict(bind_conflict("gone", "MyBinder"))


def test_other_failures_are_plain_errors_with_the_binders_message():
    pod = make_pod("p")
    status = asyncio.run(DefaultBinder(Refusing(ApiUnavailable("binding default/p to n1: HTTP 500: boom")))
                         .bind(CycleState(), pod, "n1"))
    assert status.code == Code.ERROR and not is_bind_conflict(status)
    assert status.message() == "binding default/p to n1: HTTP 500: boom"
    with pytest.raises(RuntimeError, match="a bug"):  # not the binder's report: the framework wraps it
        asyncio.run(DefaultBinder(Refusing(RuntimeError("a bug"))).bind(CycleState(), pod, "n1"))
    assert not is_bind_conflict(Status.error("x"))
