"""scorer.bench.snapshot: a kubectl export (YAML, JSON, multi-document) to a bench Setup,
scaled, topped up with pods like the cluster's, and schedulable in process."""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from scorer.bench.runner import run_point
from scorer.bench.snapshot import HOSTNAME_LABEL, _yaml_list_items, load_cluster_setup
from scorer.bench.spec import PointSpec, Setup
from scorer.errors import InputError, ModelError, ReadError
from scorer.model import load_objects
from scorer.simulate import simulate

CLUSTER = Path(__file__).parent / "data" / "bench-cluster.yaml"
ZONE = "topology.kubernetes.io/zone"
SERVER_FIELDS = {"managedFields", "resourceVersion", "uid", "creationTimestamp", "selfLink", "generation"}


def cluster_list() -> dict[str, Any]:
    return yaml.safe_load(CLUSTER.read_text())


def write_list(tmp_path: Path, items: list[dict[str, Any]], name: str = "cluster.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def all_objects(setup: Setup) -> list[dict[str, Any]]:
    return [*setup.namespaces, *setup.nodes, *setup.workloads, *setup.init, *setup.measured]


def names(objects: list[dict[str, Any]]) -> list[str]:
    return [obj["metadata"]["name"] for obj in objects]


def by_name(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {obj["metadata"]["name"]: obj for obj in objects}


def kubectl_list(nodes: int, pods_per_node: int) -> dict[str, Any]:
    """A generated ``kubectl get nodes,pods -o yaml`` of ``nodes`` nodes (3 zones) with
    ``pods_per_node`` bound pods each and one pending pod per node, objects as kubectl
    writes them (managedFields, status, ownerReferences), from the fixture's objects."""
    items = cluster_list()["items"]
    node_template = items[0]
    pod_template = items[4]
    out: list[dict[str, Any]] = []
    for n in range(nodes):
        node = json.loads(json.dumps(node_template))
        node["metadata"]["name"] = node["metadata"]["labels"][HOSTNAME_LABEL] = f"node-{n}"
        node["metadata"]["labels"][ZONE] = f"zone-{n % 3}"
        out.append(node)
        for p in range(pods_per_node + 1):
            pod = json.loads(json.dumps(pod_template))
            pod["metadata"]["name"] = f"web-{n}-{p}"
            if p == pods_per_node:
                del pod["spec"]["nodeName"]
                pod["status"] = {"phase": "Pending"}
            else:
                pod["spec"]["nodeName"] = node["metadata"]["name"]
            out.append(pod)
    return {"apiVersion": "v1", "kind": "List", "items": out, "metadata": {"resourceVersion": ""}}


# -- reading a kubectl export ---------------------------------------------------------------------


def test_a_kubectl_list_becomes_nodes_bound_and_pending_pods_with_unused_kinds_counted():
    setup = load_cluster_setup(CLUSTER)
    assert names(setup.nodes) == ["node-a", "node-b"]
    assert names(setup.init) == ["web-7d4b9c6f5d-abcde", "web-7d4b9c6f5d-fghij", "kube-proxy-4xk9z", "db-0"]
    # Without a scheduler name every pending pod is measured, whatever its scheduler.
    assert names(setup.measured) == ["web-7d4b9c6f5d-klmno", "batch-runner"]
    assert names(setup.namespaces) == ["default", "kube-system"]
    assert [w["kind"] for w in setup.workloads] == ["ReplicaSet", "StatefulSet", "Service", "PodDisruptionBudget"]
    assert setup.ignored == {"Pod (completed)": 1, "Deployment": 1, "Secret": 1, "ConfigMap": 1, "Event": 1}


def test_objects_are_cleaned_for_an_api_server_keeping_what_scorer_reads():
    setup = load_cluster_setup(CLUSTER)
    for obj in all_objects(setup):
        assert not SERVER_FIELDS & obj["metadata"].keys(), obj["metadata"]["name"]
        assert "kubectl.kubernetes.io/last-applied-configuration" not in obj["metadata"].get("annotations", {})
        assert obj["apiVersion"] and obj["kind"]
    node = setup.nodes[0]
    assert set(node["status"]) == {"allocatable", "capacity", "conditions", "images", "addresses"}
    assert node["status"]["conditions"][0]["type"] == "Ready"
    assert node["metadata"]["labels"][ZONE] == "eu-west-1a"
    bound = by_name(setup.init)["web-7d4b9c6f5d-abcde"]
    assert bound["status"] == {"phase": "Running", "startTime": "2024-05-02T11:00:00Z"}
    assert bound["metadata"]["ownerReferences"][0]["name"] == "web-7d4b9c6f5d"
    assert bound["spec"]["nodeName"] == "node-a"
    pending = by_name(setup.measured)["web-7d4b9c6f5d-klmno"]
    assert "status" not in pending  # its nominatedNodeName came from the live cluster
    assert pending["metadata"]["namespace"] == "default"
    service, budget = setup.workloads[2], setup.workloads[3]
    assert service["spec"]["selector"] == {"app": "web"}
    assert not {"clusterIP", "clusterIPs", "ipFamilies"} & service["spec"].keys()
    assert service["spec"]["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    assert "annotations" not in service["metadata"]  # only last-applied-configuration was there
    assert budget["status"] == {"disruptionsAllowed": 1}
    assert "status" not in setup.workloads[0]


def test_json_and_multi_document_yaml_give_the_same_setup(tmp_path):
    data = cluster_list()
    as_json = tmp_path / "cluster.json"
    as_json.write_text(json.dumps(data, indent=4))
    documents = tmp_path / "documents.yaml"
    documents.write_text(yaml.safe_dump_all(data["items"]))
    expected = load_cluster_setup(CLUSTER)
    assert load_cluster_setup(as_json) == expected
    assert load_cluster_setup(documents) == expected


def test_typed_lists_may_omit_the_kind_of_their_items(tmp_path):
    items = cluster_list()["items"]
    node, pod = dict(items[0]), dict(items[5])
    del node["kind"], pod["kind"]
    path = tmp_path / "typed.yaml"
    path.write_text(yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "NodeList", "items": [node]},
        {"apiVersion": "v1", "kind": "PodList", "items": [pod]},
    ]))
    setup = load_cluster_setup(path)
    assert names(setup.nodes) == ["node-a"]
    assert setup.nodes[0]["kind"] == "Node"
    assert setup.ignored == {"Pod (on a missing node)": 1}  # web-...-fghij is on node-b


def test_a_scheduler_name_keeps_its_pending_pods_and_counts_the_others():
    setup = load_cluster_setup(CLUSTER, scheduler_name="default-scheduler")
    assert names(setup.measured) == ["web-7d4b9c6f5d-klmno"]
    assert setup.ignored["Pod (another scheduler)"] == 1
    assert names(load_cluster_setup(CLUSTER, scheduler_name="batch-scheduler").measured) == ["batch-runner"]


def test_pods_that_would_never_be_scheduled_are_counted_not_measured(tmp_path):
    items = cluster_list()["items"]
    pending = items[6]
    deleting = json.loads(json.dumps(pending))
    deleting["metadata"] |= {"name": "leaving", "deletionTimestamp": "2024-06-01T08:31:00Z"}
    gated = json.loads(json.dumps(pending))
    gated["metadata"]["name"] = "gated"
    gated["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    setup = load_cluster_setup(write_list(tmp_path, [items[0], pending, deleting, gated]))
    assert names(setup.measured) == ["web-7d4b9c6f5d-klmno"]
    assert setup.ignored == {"Pod (being deleted)": 1, "Pod (scheduling gates)": 1}


def test_namespaces_the_file_does_not_list_are_added(tmp_path):
    items = cluster_list()["items"]
    pod = json.loads(json.dumps(items[6]))
    pod["metadata"]["namespace"] = "team-a"
    setup = load_cluster_setup(write_list(tmp_path, [items[0], items[2], pod]))
    assert setup.namespaces == [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels":
                                                               {"kubernetes.io/metadata.name": "default"}}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels":
                                                               {"kubernetes.io/metadata.name": "team-a"}}},
    ]


# -- scale ----------------------------------------------------------------------------------------


def test_scale_3_copies_nodes_and_pods_with_unique_names_keeping_zones_and_owners():
    setup = load_cluster_setup(CLUSTER, scale=3)
    assert names(setup.nodes) == ["node-a", "node-b", "node-a-s1", "node-b-s1", "node-a-s2", "node-b-s2"]
    assert (len(setup.init), len(setup.measured)) == (12, 6)
    assert len(set(names(setup.init + setup.measured))) == 18
    for node in setup.nodes:
        assert node["metadata"]["labels"][HOSTNAME_LABEL] == node["metadata"]["name"]
    zones = Counter(node["metadata"]["labels"][ZONE] for node in setup.nodes)
    assert zones == {"eu-west-1a": 3, "eu-west-1b": 3}
    copy_of = re.compile(r"-s\d$")
    for pod in setup.init:  # each bound pod on its node's copy: both with the same copy suffix, or none
        suffix = copy_of.search(pod["metadata"]["name"])
        assert copy_of.search(pod["spec"]["nodeName"]) == suffix or (
            suffix and pod["spec"]["nodeName"].endswith(suffix.group()))
    copy = by_name(setup.init)["web-7d4b9c6f5d-fghij-s2"]
    assert copy["spec"]["nodeName"] == "node-b-s2"
    assert copy["metadata"]["ownerReferences"] == by_name(setup.init)["web-7d4b9c6f5d-fghij"]["metadata"][
        "ownerReferences"]
    assert copy["metadata"]["labels"] == {"app": "web", "pod-template-hash": "7d4b9c6f5d"}
    # Namespaces, owners and budgets are not copied; the original is untouched.
    assert (len(setup.namespaces), len(setup.workloads)) == (2, 4)
    assert by_name(setup.init)["web-7d4b9c6f5d-fghij"]["spec"]["nodeName"] == "node-b"


def test_scale_moves_pods_pinned_to_a_node_to_the_copy_of_that_node():
    setup = load_cluster_setup(CLUSTER, scale=2)
    proxy = by_name(setup.init)["kube-proxy-4xk9z-s1"]
    term = proxy["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]
    assert term["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": ["node-a-s1"]}]
    assert proxy["spec"]["nodeName"] == "node-a-s1"
    original = by_name(setup.init)["kube-proxy-4xk9z"]
    assert original["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["node-a"]


def test_a_hostname_label_past_63_characters_is_shortened_with_a_hash(tmp_path, caplog):
    node = cluster_list()["items"][0]
    long_name = "ip-10-0-0-1." + "x" * 47 + ".internal"  # 68 characters: fine as a node name
    node["metadata"]["name"] = long_name
    node["metadata"]["labels"][HOSTNAME_LABEL] = long_name[:63]
    pod = json.loads(json.dumps(cluster_list()["items"][6]))
    pod["spec"]["nodeSelector"] = {HOSTNAME_LABEL: long_name[:63]}
    with caplog.at_level(logging.WARNING, logger="scorer.bench.snapshot"):
        setup = load_cluster_setup(write_list(tmp_path, [node, pod]), scale=3)
    hostnames = [n["metadata"]["labels"][HOSTNAME_LABEL] for n in setup.nodes]
    assert names(setup.nodes) == [long_name, long_name + "-s1", long_name + "-s2"]
    assert all(len(h) <= 63 for h in hostnames) and len(set(hostnames)) == 3
    assert hostnames[2].endswith("-s2") and hostnames[2].startswith("ip-10-0-0-1.xxx")
    assert "shortened" in caplog.text
    selectors = [p["spec"]["nodeSelector"][HOSTNAME_LABEL] for p in setup.measured]
    assert selectors == hostnames  # pending pods pinned by hostname follow their node's copy


def test_a_copy_named_like_an_object_of_the_file_is_an_error(tmp_path):
    node_a, node_b = cluster_list()["items"][:2]
    node_b["metadata"]["name"] = "node-a-s1"
    with pytest.raises(InputError, match=r"Node node-a-s1 is both in the file and the name of a copy"):
        load_cluster_setup(write_list(tmp_path, [node_a, node_b]), scale=2)


# -- pods like mine -------------------------------------------------------------------------------


def test_pods_tops_up_the_pending_pods_with_clones_of_bound_pods_leaving_daemon_pods_out():
    setup = load_cluster_setup(CLUSTER, pods=6, scheduler_name="default-scheduler")
    assert names(setup.measured) == [
        "web-7d4b9c6f5d-klmno",
        "web-7d4b9c6f5d-abcde-bench-0", "web-7d4b9c6f5d-fghij-bench-1", "db-0-bench-2",
        "web-7d4b9c6f5d-abcde-bench-3", "web-7d4b9c6f5d-fghij-bench-4",
    ]
    clone, template = setup.measured[1], by_name(setup.init)["web-7d4b9c6f5d-abcde"]
    assert "nodeName" not in clone["spec"] and "status" not in clone
    for field in ("namespace", "labels", "ownerReferences"):
        assert clone["metadata"][field] == template["metadata"][field]
    assert clone["spec"]["containers"] == template["spec"]["containers"]
    assert clone["spec"]["schedulerName"] == "default-scheduler"
    assert template["spec"]["nodeName"] == "node-a"  # the bound pod itself is unchanged


def test_pods_cuts_the_pending_pods_to_the_first_n():
    assert names(load_cluster_setup(CLUSTER, pods=1).measured) == ["web-7d4b9c6f5d-klmno"]
    assert load_cluster_setup(CLUSTER, pods=0).measured == []


def test_clones_take_the_scheduler_name_given():
    setup = load_cluster_setup(CLUSTER, pods=3, scheduler_name="batch-scheduler")
    assert [p["spec"]["schedulerName"] for p in setup.measured] == ["batch-scheduler"] * 3


# -- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("content", "message"), [
    (None, r"missing\.yaml: no such file"),
    ("nodes: [unclosed\n", r"bad\.yaml: .*"),
    ("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  metadata: {name: s}\n",
     r"bad\.yaml: the cluster file has no Node objects"),
    ("apiVersion: v1\nkind: List\nitems: 5\n", r"List \(document 1 of .*bad\.yaml\): items: expected a list"),
    ("apiVersion: v1\nkind: List\nitems:\n- just text\n",
     r"document 1 of .*bad\.yaml, items\[0\]: expected a Kubernetes object"),
    ("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items: []\n",
     r"items\[0\]: a List inside a list is not read"),
])
def test_a_file_that_cannot_be_read_is_one_clear_error(tmp_path, content, message):
    path = tmp_path / ("missing.yaml" if content is None else "bad.yaml")
    if content is not None:
        path.write_text(content)
    with pytest.raises(InputError, match=message) as raised:
        load_cluster_setup(path)
    assert "\n" not in str(raised.value)


def test_a_binary_file_is_refused():
    with pytest.raises(ReadError, match=r"not UTF-8 text"):
        load_cluster_setup("/bin/sh")


def test_an_object_that_does_not_decode_is_named_with_its_item_and_field(tmp_path):
    data = cluster_list()
    data["items"][5]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ModelError, match=r"Pod default/web-7d4b9c6f5d-fghij \(document 1 of .*cluster\.yaml, "
                                         r"items\[5\]\): spec\.containers\[0\]\.resources\.requests\.cpu"):
        load_cluster_setup(path)


def test_an_object_defined_twice_is_an_error(tmp_path):
    node = cluster_list()["items"][0]
    with pytest.raises(ModelError, match=r"Node node-a \(.*items\[1\]\): defined twice, first in .*items\[0\]"):
        load_cluster_setup(write_list(tmp_path, [node, node]))


@pytest.mark.parametrize(("options", "message"), [
    ({"scale": 0}, r"--scale: expected a whole number of at least 1, got 0"),
    ({"scale": 1.5}, r"--scale: expected a whole number of at least 1"),
    ({"pods": -1}, r"--pods: expected a whole number of at least 0, got -1"),
])
def test_bad_options_are_errors(options, message):
    with pytest.raises(InputError, match=message):
        load_cluster_setup(CLUSTER, **options)


def test_more_pods_with_nothing_bound_to_clone_is_an_error(tmp_path):
    items = cluster_list()["items"]
    with pytest.raises(InputError, match=r"--pods 5: the cluster has 1 pending pods and no bound pods"):
        load_cluster_setup(write_list(tmp_path, [items[0], items[6]]), pods=5)


# -- usable ---------------------------------------------------------------------------------------


def test_the_setup_schedules_in_process():
    setup = load_cluster_setup(CLUSTER, scale=2, pods=8, scheduler_name="default-scheduler")
    objects = load_objects(json.dumps({"apiVersion": "v1", "kind": "List", "items": all_objects(setup)}))
    assert objects.warnings == []
    report = simulate(objects, autoload=False)
    assert report.nodes == 4
    assert [p.pod.removeprefix("default/") for p in report.placements] == names(setup.measured)
    assert report.placed == 8, [p.message for p in report.placements if p.node is None]


def test_a_generated_export_loads_with_every_pod_sorted(tmp_path):
    path = tmp_path / "big.json"
    path.write_text(json.dumps(kubectl_list(nodes=30, pods_per_node=4)))
    setup = load_cluster_setup(path, scale=2)
    assert (len(setup.nodes), len(setup.init), len(setup.measured)) == (60, 240, 60)
    assert Counter(node["metadata"]["labels"][ZONE] for node in setup.nodes) == {
        "zone-0": 20, "zone-1": 20, "zone-2": 20}


# -- reading a large YAML list item by item ------------------------------------------------------


def test_a_kubectl_yaml_list_is_read_item_by_item_with_the_same_objects():
    listed = _yaml_list_items(CLUSTER.read_text(), "cluster.yaml")
    assert listed is not None
    items, default_kind = listed
    assert items == cluster_list()["items"] and default_kind is None


@pytest.mark.parametrize("layout", [
    "apiVersion: v1\nkind: List\nitems:\n  - {kind: Node}\n",  # items indented
    "---\napiVersion: v1\nkind: List\nitems:\n- kind: Node\n",  # a document marker
    "apiVersion: v1\nkind: List\nitems:\n- a: &x 1\n- b: *x\n",  # an alias across items
    "apiVersion: v1\nkind: Config\nitems:\n- kind: Node\n",  # not a List
])
def test_other_layouts_are_read_whole(layout):
    assert _yaml_list_items(layout, "in.yaml") is None


def test_an_error_inside_an_item_is_reported_at_its_line_in_the_file(tmp_path):
    text = CLUSTER.read_text().replace("\n    nodeName: node-a\n", "\n    nodeName: node-a\n    nodeName: node-b\n", 1)
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    line = text.splitlines().index("    nodeName: node-b") + 1
    with pytest.raises(ReadError, match=rf"cluster\.yaml: items\[4\]\.spec\.nodeName: duplicate .* line {line}\)"):
        load_cluster_setup(path)


# -- storage objects ----------------------------------------------------------------------------------


def volume_cluster() -> list[dict[str, Any]]:
    """Two nodes; a pending pod whose claim is pre-bound to a local volume on node-b (exported with its
    status and uids), a WaitForFirstConsumer class, a CSINode, a bound pod without claims."""
    hostname = HOSTNAME_LABEL
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {hostname: n}},
              "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}} for n in ("node-a", "node-b")]
    return [
        *nodes,
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
         "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"},
        {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "node-b"},
         "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 2}}]}},
        {"apiVersion": "v1", "kind": "PersistentVolume",
         "metadata": {"name": "pv-b", "uid": "u-pv", "resourceVersion": "9"},
         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                  "local": {"path": "/mnt"}, "claimRef": {"namespace": "db", "name": "data", "uid": "u-old"},
                  "nodeAffinity": {"required": {"nodeSelectorTerms": [
                      {"matchExpressions": [{"key": hostname, "operator": "In", "values": ["node-b"]}]}]}}},
         "status": {"phase": "Bound"}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": "data", "namespace": "db", "uid": "u-old",
                      "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local", "volumeName": "pv-b",
                  "resources": {"requests": {"storage": "1Gi"}}},
         "status": {"phase": "Bound"}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "db-0", "namespace": "db"},
         "spec": {"containers": [{"name": "c", "image": "postgres"}],
                  "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "db"},
         "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "nginx"}],
                  "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}},
    ]


def test_storage_objects_are_kept_without_status_and_old_uids_and_copied_by_scale(tmp_path):
    setup = load_cluster_setup(write_list(tmp_path, volume_cluster()), scale=2)
    storage = by_name(setup.storage)
    assert sorted(storage) == ["data", "data-s1", "local", "node-b", "node-b-s1", "pv-b", "pv-b-s1"]
    assert all("status" not in obj for obj in setup.storage)
    assert storage["pv-b"]["spec"]["claimRef"] == {"namespace": "db", "name": "data"}  # a pre-binding now
    copy = storage["pv-b-s1"]["spec"]
    assert copy["claimRef"] == {"namespace": "db", "name": "data-s1"}
    term = copy["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert term["values"] == ["node-b-s1"]
    assert storage["data-s1"]["spec"]["volumeName"] == "pv-b-s1"
    pods = by_name(setup.measured)
    assert pods["db-0-s1"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "data-s1"


def test_scaled_copies_of_a_pod_with_a_claim_each_go_to_their_own_volumes_node(tmp_path):
    """In process (the in-memory PersistentVolume controller completes the pre-bindings): each copy of the
    pod follows its own volume's node."""
    setup = load_cluster_setup(write_list(tmp_path, volume_cluster()), scale=3)
    point = run_point(setup, PointSpec("cluster", 6, 3), config_path=None, profile="default")
    assert point["error"] is None and point["bound"] == 3
    assert point["check"]["volumes"] == {"claims": 3, "claims_bound": 3, "pods_off_their_volumes": 0}


def test_pods_like_mine_leave_the_claims_of_the_pod_they_copy_out(tmp_path):
    setup = load_cluster_setup(write_list(tmp_path, volume_cluster()), pods=3)
    clones = [pod for pod in setup.measured if "-bench-" in pod["metadata"]["name"]]
    assert clones and all(not pod["spec"].get("volumes") for pod in clones)
