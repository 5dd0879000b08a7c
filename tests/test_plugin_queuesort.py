"""PrioritySort: higher priority first, then the earlier queue timestamp (reference §2.2)."""

from __future__ import annotations

from scorer.framework.catalog import PluginRegistry
from scorer.framework.types import QueuedPodInfo
from scorer.plugins import queuesort
from scorer.plugins.queuesort import PrioritySort
from scorer.testing import make_pod


def qpi(pod, timestamp):
    return QueuedPodInfo(pod=pod, timestamp=timestamp)


def test_priority_sort():
    less = PrioritySort().less
    high, low = make_pod("high", priority=100), make_pod("low", priority=1)
    assert less(qpi(high, 5.0), qpi(low, 1.0))
    assert not less(qpi(low, 1.0), qpi(high, 5.0))
    a, b = make_pod("a"), make_pod("b")
    assert less(qpi(a, 1.0), qpi(b, 2.0))
    assert not less(qpi(a, 2.0), qpi(b, 2.0))


def test_registration():
    registry = PluginRegistry()
    queuesort.register(registry)
    info = registry.plugins["PrioritySort"]
    assert info.extension_points == frozenset({"queueSort"})
    assert info.args_type is None
    assert isinstance(info.factory(None, None), PrioritySort)
