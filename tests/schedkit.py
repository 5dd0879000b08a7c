"""Helpers of the scheduler tests (test_cycle, test_binding, test_scheduler): test plugins
registered through the hook, a config enabling them, and an assembly over an in-memory cluster."""

from __future__ import annotations

import asyncio

from scorer.assembly import assemble
from scorer.cluster.memory import InMemoryCluster
from scorer.hookspecs import hookimpl
from scorer.registry import build_registry
from scorer.testing import schedule_pending


class RaisingFilter:
    name = "RaisingFilter"

    def filter(self, state, pod, node):
        raise RuntimeError("boom")


class Plugins:
    """A plugin module registered through the hook, as a distribution would."""

    def __init__(self, *plugin_classes):
        self.plugin_classes = plugin_classes

    @hookimpl
    def scorer_register_plugins(self, registry):
        for cls in self.plugin_classes:
            registry.register(cls.name, lambda args, handle, cls=cls: cls(), plugin_type=cls)


def config_with(*names, weight=1, extra=None):
    profile = {"schedulerName": "default-scheduler",
               "plugins": {"multiPoint": {"enabled": [{"name": n, "weight": weight} for n in names]}}}
    profile.update(extra or {})
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [profile]}


def build(config, nodes, pods, *plugin_classes, seed=0, **kwargs):
    """An assembly whose in-memory cluster (``nodes``, ``pods``) is started: its pending pods are queued."""
    registry = build_registry(autoload=False, modules=[Plugins(*plugin_classes)])
    cluster = InMemoryCluster(nodes, pods, [])
    asm = assemble(config, cluster, registry=registry, seed=seed, **kwargs)
    cluster.start(asm.handlers)
    return asm, cluster


def schedule_all(asm):
    return asyncio.run(schedule_pending(asm.scheduler))
