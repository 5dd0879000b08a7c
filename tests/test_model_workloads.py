"""Tests for scorer.model's workloads: Services, controllers, PodDisruptionBudgets."""

from __future__ import annotations

from typing import Any

import pytest

from scorer.errors import ModelError
from scorer.model import (
    LabelSelector,
    LabelSelectorRequirement,
    Pod,
    PodDisruptionBudget,
    SelectorOwner,
    load_objects,
    object_from_dict,
    workload_from_dict,
)

# --------------------------------------------------------------------------
# Workloads: Services, controllers, PodDisruptionBudgets


def workload(kind: str, api_version: str, spec: Any = None, **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind,
                           "metadata": {"name": "w", "namespace": "shop", "resourceVersion": "7"}}
    if spec is not None:
        obj["spec"] = spec
    obj.update(extra)
    return obj


APP = LabelSelector(match_labels={"app": "web"})
APP_EXPR = LabelSelector(
    match_labels={"app": "web"},
    match_expressions=(LabelSelectorRequirement(key="tier", operator="In", values=("a", "b")),),
)
SELECTOR_APP_EXPR = {"matchLabels": {"app": "web"},
                     "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}


@pytest.mark.parametrize(
    ("obj", "selector"),
    [
        # Service: a map; no selector selects nothing, {} every pod of its namespace.
        (workload("Service", "v1", {"selector": {"app": "web"}}), APP),
        (workload("Service", "v1", {"selector": {}}), LabelSelector()),
        (workload("Service", "v1", {"ports": [{"port": 80}]}), None),
        (workload("Service", "v1"), None),
        # ReplicationController: a map; missing or empty selects nothing.
        (workload("ReplicationController", "v1", {"selector": {"app": "web"}}), APP),
        (workload("ReplicationController", "v1", {"selector": {}}), None),
        (workload("ReplicationController", "v1", {}), None),
        # ReplicaSet, StatefulSet: a LabelSelector; missing or empty selects nothing.
        (workload("ReplicaSet", "apps/v1", {"selector": SELECTOR_APP_EXPR}), APP_EXPR),
        (workload("ReplicaSet", "apps/v1", {"selector": {}}), None),
        (workload("ReplicaSet", "apps/v1", {"selector": {"matchLabels": {}}}), None),
        (workload("ReplicaSet", "apps/v1", {"replicas": 3}), None),
        (workload("StatefulSet", "apps/v1", {"selector": {"matchLabels": {"app": "web"}}}), APP),
        (workload("StatefulSet", "apps/v1", {"selector": {}}), None),
    ],
)
def test_selector_owner_from_dict(obj: dict[str, Any], selector: LabelSelector | None) -> None:
    owner = workload_from_dict(obj)
    assert owner == SelectorOwner(
        kind=obj["kind"], namespace="shop", name="w", selector=selector, resource_version="7"
    )
    assert object_from_dict(obj) == owner


@pytest.mark.parametrize("api_version", ["policy/v1", "policy/v1beta1"])
def test_pod_disruption_budget_from_dict(api_version: str) -> None:
    obj = workload(
        "PodDisruptionBudget",
        api_version,
        {"minAvailable": 2, "selector": SELECTOR_APP_EXPR},
        status={"disruptionsAllowed": 1, "currentHealthy": 3,
                "disruptedPods": {"web-1": "2024-01-02T03:04:05Z", "web-2": "2024-01-02T03:04:06Z"}},
    )
    assert workload_from_dict(obj) == PodDisruptionBudget(
        namespace="shop", name="w", selector=APP_EXPR, disruptions_allowed=1,
        disrupted_pods=frozenset({"web-1", "web-2"}), resource_version="7",
    )


@pytest.mark.parametrize(
    "spec", [None, {}, {"selector": None}, {"selector": {}}, {"selector": {"matchExpressions": []}}]
)
def test_pod_disruption_budget_without_selector_protects_nothing(spec: Any) -> None:
    budget = workload_from_dict(workload("PodDisruptionBudget", "policy/v1", spec))
    assert isinstance(budget, PodDisruptionBudget)
    assert budget.selector is None
    assert budget.disruptions_allowed == 0 and budget.disrupted_pods == frozenset()
    assert not budget.protects(Pod(namespace="shop", name="p"))


def test_workload_namespace_defaults() -> None:
    owner = workload_from_dict({"kind": "Service", "metadata": {"name": "s"}, "spec": {"selector": {"a": "b"}}})
    assert owner.namespace == "default"


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (workload("Service", "apps/v1"),
         'Service shop/w: apiVersion: expected "v1" (the only version of Service), got string "apps/v1"'),
        (workload("ReplicaSet", "extensions/v1beta1"),
         'ReplicaSet shop/w: apiVersion: expected "apps/v1" (the only version of ReplicaSet), '
         'got string "extensions/v1beta1"'),
        (workload("PodDisruptionBudget", "v1"),
         'PodDisruptionBudget shop/w: apiVersion: expected "policy/v1" or "policy/v1beta1", got string "v1"'),
        (workload("Service", "v1", {"selector": ["app"]}),
         "Service shop/w: spec.selector: expected a map of strings, got list"),
        (workload("Service", "v1", {"selector": {"app": 1}}),
         "Service shop/w: spec.selector.app: expected a string, got integer 1 (quote it in YAML)"),
        (workload("ReplicationController", "v1", []),
         "ReplicationController shop/w: spec: expected an object, got list"),
        (workload("ReplicaSet", "apps/v1", {"selector": {"matchExpressions": [{"key": "a", "operator": "Gt",
                                                                                "values": ["1"]}]}}),
         'ReplicaSet shop/w: spec.selector.matchExpressions[0].operator: unknown operator "Gt", '
         "expected one of In, NotIn, Exists, DoesNotExist"),
        (workload("StatefulSet", "apps/v1", {"selector": "app=web"}),
         'StatefulSet shop/w: spec.selector: expected an object, got string "app=web"'),
        (workload("PodDisruptionBudget", "policy/v1", {"selector": {"matchLabels": {"a": "b"}}},
                  status={"disruptionsAllowed": -1}),
         "PodDisruptionBudget shop/w: status.disruptionsAllowed: -1 out of range, "
         "expected an integer from 0 to 2147483647"),
        (workload("PodDisruptionBudget", "policy/v1", None, status={"disruptionsAllowed": "1"}),
         "PodDisruptionBudget shop/w: status.disruptionsAllowed: expected an integer, got string \"1\""),
        (workload("PodDisruptionBudget", "policy/v1", None, status={"disruptedPods": ["a"]}),
         "PodDisruptionBudget shop/w: status.disruptedPods: expected an object, got list"),
        ({"kind": "ReplicaSet", "apiVersion": "apps/v1", "metadata": {"namespace": "shop"}},
         "ReplicaSet: metadata.name: required"),
    ],
)
def test_workload_errors(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(ModelError) as info:
        object_from_dict(obj, origin="")
    assert str(info.value) == message


def test_workload_from_dict_names_the_kinds_it_reads() -> None:
    with pytest.raises(ModelError) as info:
        workload_from_dict({"kind": "Pod", "metadata": {"name": "p"}})
    assert str(info.value) == (
        "object p: kind: expected one of Service, ReplicationController, ReplicaSet, StatefulSet, "
        'PodDisruptionBudget, got string "Pod"'
    )


WORKLOADS_YAML = """\
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {selector: {app: web}}
---
apiVersion: apps/v1
kind: ReplicaSetList
items:
- metadata: {name: web-7d, namespace: shop}
  spec: {selector: {matchLabels: {app: web}}}
- apiVersion: apps/v1
  kind: StatefulSet
  metadata: {name: db, namespace: shop}
  spec: {selector: {matchLabels: {app: db}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: shop}
spec: {selector: {matchLabels: {app: web}}}
status: {disruptionsAllowed: 2}
---
apiVersion: v1
kind: ReplicationController
metadata: {name: legacy}
spec: {selector: {app: legacy}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
"""


def test_load_reads_workloads() -> None:
    loaded = load_objects(WORKLOADS_YAML, "cluster.yaml")
    assert [(type(w).__name__, getattr(w, "kind", ""), w.namespace, w.name) for w in loaded.workloads] == [
        ("SelectorOwner", "Service", "shop", "web"),
        ("SelectorOwner", "ReplicaSet", "shop", "web-7d"),
        ("SelectorOwner", "StatefulSet", "shop", "db"),
        ("PodDisruptionBudget", "", "shop", "web"),  # same name as the Service: another kind
        ("SelectorOwner", "ReplicationController", "default", "legacy"),
    ]
    assert loaded.skipped == ["Deployment shop/web"]
    assert loaded.warnings == ["cluster.yaml: skipped 1 object of kinds scorer does not read: 1 Deployment"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "kind: Service\nmetadata: {name: a}\n---\nkind: Service\nmetadata: {name: a, namespace: default}\n",
            "Service default/a (document 2 of c.yaml): defined twice, first in document 1 of c.yaml",
        ),
        (
            "kind: PodDisruptionBudget\napiVersion: policy/v1beta1\nmetadata: {name: a}\n---\n"
            "kind: PodDisruptionBudget\napiVersion: policy/v1\nmetadata: {name: a}\n",
            "PodDisruptionBudget default/a (document 2 of c.yaml): defined twice, first in document 1 of c.yaml",
        ),
        ("kind: services\nmetadata: {name: a}\n",
         'services a (document 1 of c.yaml): kind: unknown kind "services", did you mean "Service"?'),
        ("kind: replicaset\nmetadata: {name: a}\n",
         'replicaset a (document 1 of c.yaml): kind: unknown kind "replicaset", did you mean "ReplicaSet"?'),
    ],
)
def test_load_workload_errors(text: str, message: str) -> None:
    with pytest.raises(ModelError) as info:
        load_objects(text, "c.yaml")
    assert str(info.value) == message


def test_same_name_in_other_namespaces_or_kinds_is_not_a_duplicate() -> None:
    text = (
        "kind: Service\nmetadata: {name: a, namespace: x}\n---\n"
        "kind: Service\nmetadata: {name: a, namespace: y}\n---\n"
        "kind: ReplicaSet\napiVersion: apps/v1\nmetadata: {name: a, namespace: x}\n"
    )
    assert len(load_objects(text, "c.yaml").workloads) == 3
