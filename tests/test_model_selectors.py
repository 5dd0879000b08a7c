"""Tests for scorer.model's taints, tolerations, label and node selectors."""

from __future__ import annotations

from typing import Any

import pytest
from modelkit import (
    node,
    pod_dict,
)

from scorer.model import (
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    Toleration,
    parse_int64,
    pod_from_dict,
    untolerated_taints,
)

# --------------------------------------------------------------------------
# Taints and tolerations

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}, TAINT, True),
        ({"key": "dedicated", "value": "cpu", "effect": "NoSchedule"}, TAINT, False),
        ({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}, TAINT, True),
        ({"key": "dedicated", "operator": "Exists"}, TAINT, True),  # empty effect: all effects
        ({"key": "dedicated", "value": "gpu"}, TAINT, True),
        ({"operator": "Exists"}, TAINT, True),  # empty key + Exists: every taint
        ({"operator": "Exists", "effect": "NoExecute"}, TAINT, False),
        ({"key": "dedicated", "value": "gpu", "effect": "NoExecute"}, TAINT, False),
        ({"key": "other", "operator": "Exists"}, TAINT, False),
        ({"key": "k", "value": ""}, {"key": "k", "effect": "PreferNoSchedule"}, True),
        ({"key": "k"}, {"key": "k", "value": "v", "effect": "NoSchedule"}, False),
        (
            {"key": "k", "operator": "", "value": "v"},
            {"key": "k", "value": "v", "effect": "NoSchedule"},
            True,
        ),
        (
            {"key": "k", "operator": "Gt", "value": "1"},
            {"key": "k", "value": "2", "effect": "NoSchedule"},
            False,
        ),
        # Empty key with Equal (the API rejects it) compares values on any key, as Go does.
        ({"operator": "Equal", "value": "gpu"}, TAINT, True),
    ],
)
def test_toleration_tolerates(
    toleration: dict[str, Any], taint: dict[str, Any], expected: bool
) -> None:
    assert Toleration(**toleration).tolerates(Taint(**taint)) is expected


def test_untolerated_taints() -> None:
    a = Taint(key="a", effect="NoSchedule")
    b = Taint(key="b", effect="PreferNoSchedule")
    c = Taint(key="c", value="x", effect="NoExecute")
    d = Taint(key="d", effect="NoSchedule")
    tolerations = [Toleration(key="a", operator="Exists"), Toleration(key="d", value="other")]
    assert untolerated_taints([a, b, c, d], tolerations, {"NoSchedule", "NoExecute"}) == [c, d]
    assert untolerated_taints([a, b, c, d], tolerations, ["PreferNoSchedule"]) == [b]
    assert untolerated_taints([a, b, c, d], [Toleration(operator="Exists")], {"NoSchedule"}) == []
    assert untolerated_taints([], tolerations, {"NoSchedule"}) == []


# --------------------------------------------------------------------------
# Label selectors

LABELS = {"app": "web", "tier": "front", "env": "prod"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        (LabelSelector(), True),
        (LabelSelector(match_labels={"app": "web"}), True),
        (LabelSelector(match_labels={"app": "web", "tier": "front"}), True),
        (LabelSelector(match_labels={"app": "db"}), False),
        (LabelSelector(match_labels={"missing": ""}), False),
        (
            LabelSelector(
                match_expressions=(
                    LabelSelectorRequirement(key="app", operator="In", values=("web", "db")),
                )
            ),
            True,
        ),
        (
            LabelSelector(
                match_expressions=(
                    LabelSelectorRequirement(key="app", operator="In", values=("db",)),
                )
            ),
            False,
        ),
        (
            LabelSelector(
                match_expressions=(
                    LabelSelectorRequirement(key="nope", operator="In", values=("",)),
                )
            ),
            False,
        ),
        (
            LabelSelector(
                match_expressions=(
                    LabelSelectorRequirement(key="app", operator="NotIn", values=("db",)),
                )
            ),
            True,
        ),
        (
            LabelSelector(
                match_expressions=(
                    LabelSelectorRequirement(key="app", operator="NotIn", values=("web",)),
                )
            ),
            False,
        ),
        (
            LabelSelector(
                match_expressions=(
                    LabelSelectorRequirement(key="nope", operator="NotIn", values=("x",)),
                )
            ),
            True,
        ),
        (
            LabelSelector(
                match_expressions=(LabelSelectorRequirement(key="env", operator="Exists"),)
            ),
            True,
        ),
        (
            LabelSelector(
                match_expressions=(LabelSelectorRequirement(key="nope", operator="Exists"),)
            ),
            False,
        ),
        (
            LabelSelector(
                match_expressions=(LabelSelectorRequirement(key="nope", operator="DoesNotExist"),)
            ),
            True,
        ),
        (
            LabelSelector(
                match_expressions=(LabelSelectorRequirement(key="env", operator="DoesNotExist"),)
            ),
            False,
        ),
        # everything AND-ed
        (
            LabelSelector(
                match_labels={"app": "web"},
                match_expressions=(
                    LabelSelectorRequirement(key="env", operator="Exists"),
                    LabelSelectorRequirement(key="tier", operator="In", values=("back",)),
                ),
            ),
            False,
        ),
    ],
)
def test_label_selector_matches(selector: LabelSelector, expected: bool) -> None:
    assert selector.matches(LABELS) is expected


def test_parsed_label_selector() -> None:
    obj = pod_dict(
        topologySpreadConstraints=[
            {
                "maxSkew": 2,
                "topologyKey": "zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {
                    "matchLabels": {"app": "web"},
                    "matchExpressions": [
                        {"key": "env", "operator": "NotIn", "values": ["dev"]},
                        {"key": "tier", "operator": "Exists"},
                    ],
                },
            }
        ]
    )
    selector = pod_from_dict(obj).topology_spread_constraints[0].label_selector
    assert selector is not None
    assert selector.matches(LABELS)
    assert not selector.matches({"app": "web", "env": "dev", "tier": "x"})
    assert not selector.matches({"app": "web"})


# --------------------------------------------------------------------------
# Node selectors


@pytest.mark.parametrize(
    ("operator", "values", "labels", "expected"),
    [
        ("In", ("a", "b"), {"zone": "a"}, True),
        ("In", ("a", "b"), {"zone": "c"}, False),
        ("In", ("a",), {}, False),
        ("NotIn", ("a",), {"zone": "b"}, True),
        ("NotIn", ("a",), {"zone": "a"}, False),
        ("NotIn", ("a",), {}, True),
        ("Exists", (), {"zone": ""}, True),
        ("Exists", (), {}, False),
        ("DoesNotExist", (), {}, True),
        ("DoesNotExist", (), {"zone": "a"}, False),
        ("Gt", ("5",), {"zone": "10"}, True),
        ("Gt", ("5",), {"zone": "5"}, False),
        ("Gt", ("-3",), {"zone": "-2"}, True),
        ("Gt", ("5",), {"zone": "+7"}, True),  # Go ParseInt accepts a sign
        ("Gt", ("5",), {"zone": "abc"}, False),  # not an integer: no match
        ("Gt", ("5",), {"zone": "7.5"}, False),
        ("Gt", ("5",), {"zone": " 7"}, False),
        ("Gt", ("5",), {"zone": "1_0"}, False),
        ("Gt", ("5",), {"zone": "99999999999999999999"}, False),  # beyond int64
        ("Gt", ("5",), {}, False),
        ("Lt", ("5",), {"zone": "4"}, True),
        ("Lt", ("5",), {"zone": "5"}, False),
        ("Lt", ("5",), {"zone": "x"}, False),
        ("Lt", ("x",), {"zone": "1"}, False),  # a bad value (built directly) matches nothing
        ("Bogus", ("a",), {"zone": "a"}, False),
    ],
)
def test_node_selector_requirement(
    operator: str, values: tuple[str, ...], labels: dict[str, str], expected: bool
) -> None:
    requirement = NodeSelectorRequirement(key="zone", operator=operator, values=values)
    assert requirement.matches(labels) is expected


def test_node_selector_term_and_selector() -> None:
    zone_a = NodeSelectorRequirement(key="zone", operator="In", values=("a",))
    ssd = NodeSelectorRequirement(key="disk", operator="Exists")
    named = NodeSelectorRequirement(key="metadata.name", operator="In", values=("n1",))
    n1 = node("n1", {"zone": "a"})
    n2 = node("n2", {"zone": "a", "disk": "ssd"})
    n3 = node("n3", {"zone": "b", "disk": "ssd"})

    assert not NodeSelectorTerm().matches(n1)  # no requirements: matches nothing
    assert NodeSelectorTerm(match_expressions=(zone_a,)).matches(n1)
    assert not NodeSelectorTerm(match_expressions=(zone_a, ssd)).matches(n1)  # AND
    assert NodeSelectorTerm(match_expressions=(zone_a, ssd)).matches(n2)
    assert NodeSelectorTerm(match_fields=(named,)).matches(n1)
    assert not NodeSelectorTerm(match_fields=(named,)).matches(n2)
    assert not NodeSelectorTerm(match_expressions=(ssd,), match_fields=(named,)).matches(n1)

    either = NodeSelector(
        terms=(NodeSelectorTerm(match_fields=(named,)), NodeSelectorTerm(match_expressions=(ssd,)))
    )
    assert [either.matches(n) for n in (n1, n2, n3)] == [True, True, True]
    assert not either.matches(node("n4"))
    assert not NodeSelector().matches(n1)


def test_parsed_node_affinity_matches() -> None:
    obj = pod_dict(
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["8"]}]},
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["big"]}
                            ]
                        },
                    ]
                }
            }
        }
    )
    affinity = pod_from_dict(obj).affinity
    assert affinity is not None and affinity.node_affinity is not None
    required = affinity.node_affinity.required
    assert required is not None
    assert required.matches(node("small", {"cores": "4"}))
    assert not required.matches(node("mid", {"cores": "16"}))
    assert required.matches(node("big", {"cores": "64"}))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("42", 42),
        ("-42", -42),
        ("+42", 42),
        ("9223372036854775807", 2**63 - 1),
        ("-9223372036854775808", -(2**63)),
        ("9223372036854775808", None),
        ("", None),
        ("-", None),
        ("1.0", None),
        ("1e3", None),
        (" 1", None),
        ("١", None),
    ],
)
def test_parse_int64(text: str, expected: int | None) -> None:
    assert parse_int64(text) == expected
