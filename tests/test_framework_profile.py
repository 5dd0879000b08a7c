"""What Framework is built from: a FrameworkProfile, which the configuration's
ResolvedProfile is (the framework names the shape, it does not import config)."""

from __future__ import annotations

import attrs

from scorer.config import load_and_resolve
from scorer.framework.profile import FrameworkProfile
from scorer.framework.runtime import Framework
from scorer.testing import make_handle


def test_resolved_profile_is_a_framework_profile(registry):
    catalog = registry.catalog()
    _, (resolved,) = load_and_resolve(None, catalog)
    assert isinstance(resolved, FrameworkProfile)
    fwk = Framework(resolved, catalog, make_handle(profile_name=resolved.scheduler_name))
    assert fwk.profile_name == "default-scheduler"
    assert [p.name for p in fwk.filter_plugins] == list(resolved.points["filter"])
    assert fwk.weights == resolved.weights


@attrs.frozen
class HandBuilt:
    scheduler_name: str
    percentage_of_nodes_to_score: int | None
    points: dict
    weights: dict
    args: dict


def test_any_object_of_that_shape_builds_a_framework(registry):
    profile = HandBuilt("mine", 50, {"queueSort": ("PrioritySort",), "score": ("ImageLocality",)},
                        {"ImageLocality": 3}, {})
    assert isinstance(profile, FrameworkProfile)
    fwk = Framework(profile, registry.catalog(), make_handle())
    assert fwk.percentage_of_nodes_to_score == 50
    assert fwk.queue_sort is not None and fwk.queue_sort.name == "PrioritySort"
    assert [p.name for p in fwk.score_plugins] == ["ImageLocality"]
    assert not isinstance(object(), FrameworkProfile)
