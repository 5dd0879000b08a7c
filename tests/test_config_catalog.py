"""The plugin catalog the configuration tests use, and checks that it matches the real one.

The other ``test_config_*`` modules import ``make_catalog`` from here. It
names the plugins of scorer's first release plus a fake out-of-tree
``NetworkTraffic`` score plugin with its own args (the seed articles' plugin).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from scorer.config import unstructure
from scorer.framework.catalog import PluginInfo
from scorer.plugins.noderesources.fit import NodeResourcesFitArgs


@attrs.frozen(slots=True)
class NetworkTrafficArgs:
    """Args of the seed articles' NetworkTraffic plugin."""

    ip: str = "http://prometheus:9090"
    device_name: str = "eth0"
    time_range: int = 60

    def validate(self) -> list[tuple[str, str]]:
        return [] if self.time_range > 0 else [("timeRange", "must be greater than 0")]


FIRST_RELEASE: dict[str, tuple[set[str], type | None]] = {
    "PrioritySort": ({"queueSort"}, None),
    "DefaultBinder": ({"bind"}, None),
    "NodeName": ({"filter"}, None),
    "NodeUnschedulable": ({"filter"}, None),
    "TaintToleration": ({"filter", "preScore", "score"}, None),
    "NodeResourcesFit": ({"preFilter", "filter", "preScore", "score"}, NodeResourcesFitArgs),
    "NetworkTraffic": ({"score"}, NetworkTrafficArgs),
}

# Extension points of kube plugins scorer does not have yet, for tests that need them.
KUBE_EXTRA: dict[str, set[str]] = {
    "SchedulingGates": {"preEnqueue"},
    "NodeAffinity": {"preFilter", "filter", "preScore", "score"},
    "NodePorts": {"preFilter", "filter"},
    "VolumeRestrictions": {"preFilter", "filter"},
    "NodeVolumeLimits": {"preFilter", "filter"},
    "VolumeBinding": {"preFilter", "filter", "reserve", "preBind"},
    "VolumeZone": {"preFilter", "filter"},
    "PodTopologySpread": {"preFilter", "filter", "preScore", "score"},
    "InterPodAffinity": {"preFilter", "filter", "preScore", "score"},
    "DefaultPreemption": {"postFilter"},
    "NodeResourcesBalancedAllocation": {"preScore", "score"},
    "ImageLocality": {"score"},
}


def _factory(*_args: object) -> None:
    return None


def make_catalog(
    *, kube_extra: Iterable[str] = (), without: Iterable[str] = (), **extra: set[str]
) -> dict[str, PluginInfo]:
    """First-release plugins minus ``without``, plus kube plugins and fakes (``**extra``)."""
    points = {name: (set(p), args) for name, (p, args) in FIRST_RELEASE.items()}
    for name in without:
        del points[name]
    points.update({name: (KUBE_EXTRA[name], None) for name in kube_extra})
    points.update({name: (set(p), None) for name, p in extra.items()})
    return {
        name: PluginInfo(name, _factory, frozenset(p), args_type=args, source="test")
        for name, (p, args) in points.items()
    }


def full_catalog() -> dict[str, PluginInfo]:
    """Every plugin of the v1 default list, as if scorer implemented them all."""
    return make_catalog(kube_extra=KUBE_EXTRA)


def test_first_release_matches_the_registry(catalog):
    for name, (points, args) in FIRST_RELEASE.items():
        if name == "NetworkTraffic":
            continue
        assert catalog[name].extension_points >= frozenset(points), name
        assert catalog[name].args_type is args, name


def test_network_traffic_args_round_trip():
    assert unstructure(NetworkTrafficArgs()) == {
        "ip": "http://prometheus:9090",
        "deviceName": "eth0",
        "timeRange": 60,
    }
