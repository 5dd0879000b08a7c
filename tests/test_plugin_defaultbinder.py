"""DefaultBinder: binds through the handle's binder (the in-memory cluster here)."""

from __future__ import annotations

import asyncio

from scorer.cluster.memory import InMemoryCluster
from scorer.framework import Code, CycleState
from scorer.framework.catalog import PluginRegistry
from scorer.plugins import defaultbinder
from scorer.plugins.defaultbinder import DefaultBinder
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
