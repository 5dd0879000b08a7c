"""Tests for scorer.model's loading: load_objects, load_file, whole cluster files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from modelkit import (
    GI,
    container,
    node_dict,
    pod_dict,
)

from scorer.errors import ModelError
from scorer.model import (
    LoadedObjects,
    SelectorOwner,
    load_file,
    load_objects,
    node_from_dict,
    pod_from_dict,
)

# --------------------------------------------------------------------------
# load_objects / load_file

CLUSTER_YAML = """\
# a comment
apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels: {team: a}
---
apiVersion: v1
kind: Node
metadata:
  name: n1
  labels:
    zone: a
status:
  capacity: {cpu: "4", memory: 16Gi, pods: "110"}
---
---
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: shop
  creationTimestamp: 2024-01-02T03:04:05Z
spec:
  containers:
  - name: app
    image: nginx
    resources:
      requests:
        cpu: 0.5
        memory: 1e3
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
"""


def test_load_multi_document_yaml() -> None:
    loaded = load_objects(CLUSTER_YAML, "cluster.yaml")
    assert isinstance(loaded, LoadedObjects)
    assert [n.name for n in loaded.namespaces] == ["shop"]
    assert loaded.namespaces[0].labels == {"team": "a"}
    assert [n.name for n in loaded.nodes] == ["n1"]
    assert loaded.nodes[0].allocatable == {"cpu": 4000, "memory": 16 * GI, "pods": 110}
    (pod,) = loaded.pods
    assert pod.key == "shop/web"
    assert pod.requests == {"cpu": 500, "memory": 1000}
    assert pod.creation_timestamp == "2024-01-02T03:04:05Z"
    assert loaded.workloads == [SelectorOwner(kind="Service", namespace="shop", name="web")]
    assert loaded.skipped == ["Deployment api"]
    assert loaded.warnings == [
        "cluster.yaml: skipped 1 object of kinds scorer does not read: 1 Deployment"
    ]


def test_load_json_list() -> None:
    text = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                pod_dict("a"),
                node_dict("n1"),
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "cm", "namespace": "x"},
                },
            ],
        },
        indent=2,
    )
    loaded = load_objects(text, "all.json")
    assert [p.name for p in loaded.pods] == ["a"]
    assert [n.name for n in loaded.nodes] == ["n1"]
    assert loaded.skipped == ["ConfigMap x/cm"]


def test_load_typed_lists_whose_items_omit_kind() -> None:
    pods = {
        "kind": "PodList",
        "apiVersion": "v1",
        "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}],
    }
    nodes = {"kind": "NodeList", "apiVersion": "v1", "items": [{"metadata": {"name": "n1"}}]}
    loaded = load_objects(json.dumps(pods) + "\n---\n" + json.dumps(nodes))
    assert [p.key for p in loaded.pods] == ["default/a", "default/b"]
    assert [n.name for n in loaded.nodes] == ["n1"]
    assert load_objects(json.dumps({"kind": "PodList", "items": None})).pods == []


def test_load_single_json_object() -> None:
    loaded = load_objects(json.dumps(pod_dict("solo")), "pod.json")
    assert [p.name for p in loaded.pods] == ["solo"]


def test_load_empty_input() -> None:
    for text in ("", "\n", "---\n---\n", "# nothing\n"):
        assert load_objects(text) == LoadedObjects()


def test_load_flow_style_yaml_that_is_not_json() -> None:
    loaded = load_objects("{kind: Namespace, metadata: {name: a}}")
    assert [n.name for n in loaded.namespaces] == ["a"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Pod\nmetadata:\n  name: [a\n", "cluster.yaml: line 4, column 1: invalid YAML: "),
        (
            "a: b: c\n",
            "cluster.yaml: line 1, column 5: invalid YAML: mapping values are not allowed",
        ),
        (
            '{\n  "kind": "Pod"\n  "metadata": {}\n}\n',
            "cluster.yaml: line 3, column 3: invalid JSON: ",
        ),
        (
            "kind: Namespace\nmetadata: {name: a}\n---\n- a\n- b\n",
            "document 2 of cluster.yaml: expected a Kubernetes object (a mapping with apiVersion "
            "and kind), got list",
        ),
        (
            "just text\n",
            "document 1 of cluster.yaml: expected a Kubernetes object "
            '(a mapping with apiVersion and kind), got string "just text"',
        ),
        ("---\nmetadata: {name: x}\n", "object x (document 1 of cluster.yaml): kind: required"),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {}\n",
            "Pod (document 1 of cluster.yaml): metadata.name: required",
        ),
        (
            "kind: List\nitems: {a: 1}\n",
            "List (document 1 of cluster.yaml): items: expected a list, got object",
        ),
        (
            "kind: List\nitems:\n- 5\n",
            "document 1 of cluster.yaml, items[0]: expected a Kubernetes object",
        ),
        (
            "kind: Namespace\nmetadata: {name: a}\n---\nkind: Node\nmetadata: {name: n}\n---\n"
            "kind: Pod\nmetadata: {}\n",
            "Pod (document 3 of cluster.yaml): metadata.name: required",
        ),
        (
            "kind: Pod\nmetadata: {name: web, labels: {enabled: true}}\n",
            "Pod default/web (document 1 of cluster.yaml): metadata.labels.enabled: "
            "expected a string, "
            "got boolean true (quote it in YAML)",
        ),
        (
            "kind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n"
            "  - name: a\n    resources: {requests: {cpu: abc}}\n",
            "Pod default/web (document 1 of cluster.yaml): "
            "spec.containers[0].resources.requests.cpu: "
            'invalid quantity "abc"',
        ),
        (
            json.dumps({"kind": "List", "items": [pod_dict("a"), pod_dict("b", priority="high")]}),
            "Pod default/b (document 1 of cluster.yaml, items[1]): "
            "spec.priority: expected an integer",
        ),
    ],
)
def test_load_errors_name_source(text: str, message: str) -> None:
    with pytest.raises(ModelError) as info:
        load_objects(text, "cluster.yaml")
    assert str(info.value).startswith(message), str(info.value)


def test_load_file(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER_YAML, encoding="utf-8")
    loaded = load_file(path)
    assert [p.key for p in loaded.pods] == ["shop/web"]
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: Pod\nmetadata: {}\n", encoding="utf-8")
    with pytest.raises(
        ModelError, match=r"^Pod \(document 1 of .*broken\.yaml\): metadata\.name: required$"
    ):
        load_file(str(broken))


def test_load_file_errors_name_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ModelError, match=r"nope\.yaml: no such file"):
        load_file(missing)
    with pytest.raises(ModelError, match=r": is a directory, not a file$"):
        load_file(tmp_path)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"kind: Pod\n\xff\xfe")
    with pytest.raises(ModelError, match=r"bin\.yaml: not UTF-8 text"):
        load_file(binary)


# --------------------------------------------------------------------------
# Whole cluster files: what is refused, what is reported (issue 7)


def documents(*objects: dict[str, Any]) -> str:
    return "\n---\n".join(json.dumps(obj) for obj in objects)


def memory_pod(name: str, memory: str, node_name: str = "n1", **spec: Any) -> dict[str, Any]:
    return pod_dict(name, containers=[container(requests={"memory": memory})], nodeName=node_name, **spec)


def test_per_node_totals_beyond_int64_are_refused_naming_the_pod() -> None:
    # Three 4Ei pods on one node wrapped to a negative total (an empty-looking node) before.
    text = documents(node_dict("n1"), memory_pod("a", "4Ei"), memory_pod("b", "4Ei"), memory_pod("c", "4Ei"))
    with pytest.raises(ModelError) as info:
        load_objects(text, "cluster.yaml")
    assert str(info.value) == (
        "Pod default/b (document 3 of cluster.yaml): spec.containers[*].resources.requests.memory: "
        f'with this pod, the pods bound to node "n1" request {1 << 63} in total, '
        "beyond the int64 limit of 9223372036854775807"
    )


def test_per_node_totals_count_only_pods_that_hold_resources() -> None:
    done = {"status": {"phase": "Succeeded"}}
    text = documents(
        node_dict("n1"),
        memory_pod("a", "4Ei"),
        {**memory_pod("b", "4Ei"), **done},
        memory_pod("c", "4Ei", node_name="n2"),  # on another node
        memory_pod("d", "4Ei", node_name=""),  # pending
    )
    loaded = load_objects(text, "cluster.yaml")
    assert len(loaded.pods) == 4


def test_a_pod_whose_own_requests_add_up_beyond_int64_is_refused() -> None:
    containers = [container("a", {"memory": "6Ei"}), container("b", {"memory": "6Ei"})]
    with pytest.raises(ModelError) as info:
        pod_from_dict(pod_dict("big", containers=containers))
    assert str(info.value) == (
        "Pod default/big: spec: the memory requests of the containers, init containers and overhead "
        f"add up to {12 * (1 << 60)}, beyond the int64 limit of 9223372036854775807"
    )


def test_a_single_quantity_beyond_int64_is_refused() -> None:
    with pytest.raises(ModelError, match=r"requests\.memory: quantity \"9Ei\" out of range"):
        pod_from_dict(pod_dict(containers=[container(requests={"memory": "9Ei"})]))


@pytest.mark.parametrize(
    ("size", "message"),
    [
        (10**30, f"{10**30} out of range, expected an integer from 0 to 9007199254740992"),
        ((1 << 53) + 1, f"{(1 << 53) + 1} out of range, expected an integer from 0 to 9007199254740992"),
        (-1, "-1 out of range, expected an integer from 0 to 9007199254740992"),
    ],
)
def test_image_sizes_beyond_the_columns_are_refused_at_load(size: int, message: str) -> None:
    # Before, such a size failed every pod at Score time.
    obj = node_dict("n1", images=[{"names": ["a:1"], "sizeBytes": 5}, {"names": ["b:1"], "sizeBytes": size}])
    with pytest.raises(ModelError) as info:
        load_objects(documents(obj), "cluster.yaml")
    assert str(info.value).startswith(
        f"Node n1 (document 1 of cluster.yaml): status.images[1].sizeBytes: {message}"
    )
    assert node_from_dict(node_dict("n1", images=[{"names": ["a:1"], "sizeBytes": 1 << 53}])).images


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("priority", 1 << 31, f"spec.priority: {1 << 31} out of range, expected an integer from -2147483648"),
        ("priority", 10**40, "spec.priority: 10000000000000000000000000000000000000000 out of range"),
        (
            "tolerations",
            [{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 1 << 63}],
            "spec.tolerations[0].tolerationSeconds: 9223372036854775808 out of range",
        ),
    ],
)
def test_integers_must_fit_the_api_types(field: str, value: Any, message: str) -> None:
    with pytest.raises(ModelError) as info:
        pod_from_dict(pod_dict(**{field: value}))
    assert message in str(info.value)


def test_kinds_scorer_does_not_read_are_counted_in_one_warning() -> None:
    text = documents(
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "x"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "b"}},
        {"apiVersion": "scorer.dev/v1alpha1", "kind": "MetricsSnapshot", "metrics": {}},
        node_dict("n1"),
    )
    loaded = load_objects(text, "cluster.yaml")
    assert loaded.warnings == [
        "cluster.yaml: skipped 3 objects of kinds scorer does not read: 2 Deployment, 1 ConfigMap"
    ]
    assert loaded.skipped == ["Deployment a", "ConfigMap x/c", "Deployment b"]
    # The MetricsSnapshot is not "unknown": it waits in others for the snapshot reader.
    assert [(d.number, d.data["kind"]) for d in loaded.others] == [
        (1, "Deployment"), (2, "ConfigMap"), (3, "Deployment"), (4, "MetricsSnapshot")
    ]


def test_list_items_keep_their_document_and_index() -> None:
    text = json.dumps({"kind": "List", "items": [node_dict("n1"), {"kind": "Secret", "metadata": {}}]})
    (other,) = load_objects("---\n" + text, "all.json").others
    assert other.origin == "document 1 of all.json, items[1]"
    assert other.data == {"kind": "Secret", "metadata": {}}


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            {"apiVersion": "v2", "kind": "Pod", "metadata": {"name": "web"}},
            'Pod default/web (document 2 of cluster.yaml): apiVersion: expected "v1" '
            '(the only version of Pod), got string "v2"',
        ),
        (
            {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "Node", "metadata": {"name": "n2"}},
            'Node n2 (document 2 of cluster.yaml): apiVersion: expected "v1"',
        ),
        (
            {"apiVersion": "v1", "kind": "pod", "metadata": {"name": "web"}},
            'pod web (document 2 of cluster.yaml): kind: unknown kind "pod", did you mean "Pod"?',
        ),
        ({"kind": "Pods", "metadata": {"name": "w"}}, 'kind: unknown kind "Pods", did you mean "Pod"?'),
        (
            {"kind": "NAMESPACE"},
            '(document 2 of cluster.yaml): kind: unknown kind "NAMESPACE", did you mean "Namespace"?',
        ),
        ({"kind": "nodelist", "items": []}, 'did you mean "NodeList"?'),
        (
            {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"},
            "KubeSchedulerConfiguration (document 2 of cluster.yaml): a scheduler configuration is "
            "not a cluster object; give it with --config",
        ),
    ],
)
def test_objects_that_would_vanish_are_errors(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(ModelError) as info:
        load_objects(documents(node_dict("n1"), obj), "cluster.yaml")
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("first", "second", "label"),
    [
        (node_dict("n1"), node_dict("n1"), "Node n1"),
        (pod_dict("web", "shop"), pod_dict("web", "shop"), "Pod shop/web"),
        (pod_dict("web", None), pod_dict("web", "default"), "Pod default/web"),
        (
            {"kind": "Namespace", "metadata": {"name": "a"}},
            {"kind": "Namespace", "metadata": {"name": "a", "labels": {"x": "y"}}},
            "Namespace a",
        ),
    ],
)
def test_two_objects_with_one_name_are_an_error(first: dict[str, Any], second: dict[str, Any], label: str) -> None:
    text = documents(first, {"kind": "ConfigMap", "metadata": {"name": "x"}}, second)
    with pytest.raises(ModelError) as info:
        load_objects(text, "cluster.yaml")
    assert str(info.value) == (
        f"{label} (document 3 of cluster.yaml): defined twice, first in document 1 of cluster.yaml"
    )


def test_same_pod_name_in_two_namespaces_is_fine() -> None:
    loaded = load_objects(documents(pod_dict("web", "a"), pod_dict("web", "b")))
    assert [p.key for p in loaded.pods] == ["a/web", "b/web"]


def test_pods_bound_to_missing_nodes_are_warned_about() -> None:
    done = {"status": {"phase": "Failed"}}
    text = documents(
        node_dict("n1"),
        memory_pod("a", "1Gi", node_name="n1"),
        memory_pod("b", "1Gi", node_name="gone"),
        {**memory_pod("c", "1Gi", node_name="gone"), **done},  # terminal: holds nothing
    )
    loaded = load_objects(text, "cluster.yaml")
    assert [p.name for p in loaded.pods] == ["a", "b", "c"]  # kube keeps them
    assert loaded.warnings == [
        'Pod default/b (document 3 of cluster.yaml): spec.nodeName "gone" names no Node of '
        "cluster.yaml; the pod counts toward no node"
    ]


def test_many_pods_bound_to_missing_nodes_are_summarized() -> None:
    text = documents(*(memory_pod(f"p{i}", "1Gi", node_name=f"gone-{i}") for i in range(8)))
    warnings = load_objects(text, "pods.yaml").warnings
    assert len(warnings) == 6
    assert warnings[-1] == "pods.yaml: 3 more pods are bound to nodes that are not in it; they count toward no node"


def test_names_with_control_characters_are_escaped_in_messages() -> None:
    bad = {"kind": "Pod", "metadata": {"name": "web\n\x1b[2Jfake", "labels": {"a\nb": 1}}}
    with pytest.raises(ModelError) as info:
        load_objects(documents(bad), "c.yaml")
    assert str(info.value) == (
        "Pod default/web\\n\\x1b[2Jfake (document 1 of c.yaml): metadata.labels.a\\nb: "
        "expected a string, got integer 1 (quote it in YAML)"
    )


def test_cluster_files_are_read_strictly(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("kind: Node\nmetadata:\n  name: n1\n  labels: {a: x}\n  name: n2\n")
    with pytest.raises(ModelError) as info:
        load_file(path)
    assert str(info.value) == f'document 1 of {path}: metadata.name: duplicate field "name" (again at line 5)'
    path.write_text('{"kind": "Node", "metadata": {"name": "n1"}, "status": {"capacity": {"cpu": NaN}}}')
    with pytest.raises(ModelError, match=r"status\.capacity\.cpu: expected a finite number, got number nan$"):
        load_file(path)
