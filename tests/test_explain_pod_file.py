"""``scorer explain --pod FILE``: a pod manifest that is not in the cluster, scheduled against it as it is."""

from __future__ import annotations

import json
import textwrap

import pytest

from scorer.cli import main
from scorer.explain import is_manifest_ref


@pytest.fixture(autouse=True)
def _no_autoload(monkeypatch):
    monkeypatch.setenv("SCORER_DISABLE_PLUGIN_AUTOLOAD", "1")


CLUSTER = textwrap.dedent("""
    apiVersion: v1
    kind: Node
    metadata: {name: small}
    status: {allocatable: {cpu: "2", memory: 4Gi, pods: "10"}}
    ---
    apiVersion: v1
    kind: Node
    metadata: {name: big}
    status: {allocatable: {cpu: "8", memory: 16Gi, pods: "10"}}
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: hog, namespace: shop}
    spec:
      nodeName: big
      containers: [{name: c, image: nginx, resources: {requests: {cpu: "7", memory: 1Gi}}}]
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: web, namespace: shop}
    spec: {containers: [{name: c, image: nginx, resources: {requests: {cpu: "1"}}}]}
""")

POD = textwrap.dedent("""
    apiVersion: v1
    kind: Pod
    metadata: {name: new, namespace: shop}
    spec: {containers: [{name: c, image: nginx, resources: {requests: {cpu: "1"}}}]}
""")


@pytest.fixture
def cluster_file(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    return str(path)


def explain(capsys, cluster_file, pod_ref):
    code = main(["explain", "--cluster", cluster_file, "--pod", pod_ref, "--output", "json"])
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_manifest_is_scheduled_against_the_cluster_as_it_is(capsys, cluster_file, tmp_path):
    code, out, _ = explain(capsys, cluster_file, write(tmp_path, "new.yaml", POD))
    assert code == 0
    data = json.loads(out)
    assert data["pod"] == "shop/new"
    # big has 1 cpu left after hog's 7: both fit; small is the less allocated one (LeastAllocated).
    assert data["nodes"]["big"]["feasible"] and data["nodes"]["small"]["feasible"]
    assert data["selected"] == "small"


def test_manifest_and_cluster_pod_agree_when_the_pod_is_the_same(capsys, cluster_file, tmp_path):
    web = textwrap.dedent("""
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web2", "namespace": "shop"},
         "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]}}
    """)
    _, from_cluster, _ = explain(capsys, cluster_file, "shop/web")
    _, from_file, _ = explain(capsys, cluster_file, write(tmp_path, "web2.json", web))
    a, b = json.loads(from_cluster), json.loads(from_file)
    assert b["pod"] == "shop/web2"
    assert a["nodes"] == b["nodes"] and a["selected"] == b["selected"]


def test_manifest_node_name_is_kept_and_enforced_by_the_node_name_filter(capsys, cluster_file, tmp_path):
    bound = POD.replace("spec: {", "spec: {nodeName: big, ")
    code, out, _ = explain(capsys, cluster_file, write(tmp_path, "bound.yaml", bound))
    assert code == 0
    data = json.loads(out)
    assert data["selected"] == "big"
    assert data["nodes"]["small"]["filter"]["plugin"] == "NodeName"
    # The cluster pod form explains a pod as pending: its nodeName is dropped (hog fits nowhere else).
    _, out, _ = explain(capsys, cluster_file, "shop/hog")
    hog = json.loads(out)
    assert hog["nodes"]["small"]["filter"]["plugin"] == "NodeResourcesFit"
    assert hog["selected"] == "big"


def test_a_lone_feasible_node_is_scored_and_still_chosen(capsys, cluster_file, tmp_path):
    # hog (7 cpu) fits only big. A real cycle skips scoring a lone feasible node (kube-scheduler does);
    # explain scores it anyway so the explanation shows every plugin's scores, in both --pod forms.
    hog = POD.replace("name: new", "name: hog").replace('cpu: "1"', 'cpu: "7"')
    for ref in ("shop/hog", write(tmp_path, "hog.yaml", hog)):
        code, out, _ = explain(capsys, cluster_file, ref)
        assert code == 0
        data = json.loads(out)
        assert data["selected"] == "big"
        assert [n for n, v in data["nodes"].items() if v["feasible"]] == ["big"]
        scores = data["nodes"]["big"]["scores"]
        # The default profile's score plugins that PreScore does not skip for a pod without affinity
        # or spread constraints.
        assert {"TaintToleration", "NodeResourcesFit", "NodeResourcesBalancedAllocation",
                "ImageLocality"} <= set(scores)
        assert scores["TaintToleration"]["normalized"] == 100  # no taints: the best score
        assert data["nodes"]["big"]["total"] == sum(s["weighted"] for s in scores.values()) > 0
        assert data["nodes"]["small"]["scores"] == {} and data["nodes"]["small"]["total"] == 0


def test_manifest_node_name_of_a_full_node_is_unschedulable(capsys, cluster_file, tmp_path):
    big = POD.replace('cpu: "1"', 'cpu: "2"').replace("spec: {", "spec: {nodeName: big, ")
    code, out, _ = explain(capsys, cluster_file, write(tmp_path, "big.yaml", big))
    assert code == 0
    data = json.loads(out)
    assert data["selected"] is None
    assert data["nodes"]["big"]["filter"]["reasons"] == ["Insufficient cpu"]
    assert data["nodes"]["small"]["filter"]["plugin"] == "NodeName"


def test_manifest_with_the_name_of_a_cluster_pod_replaces_it(capsys, cluster_file, tmp_path):
    # Applying shop/hog again (unbound, 7 cpu) replaces the bound hog: big's 7 cpu are free again.
    hog = POD.replace("name: new", "name: hog").replace('cpu: "1"', 'cpu: "7"')
    code, out, _ = explain(capsys, cluster_file, write(tmp_path, "hog.yaml", hog))
    assert code == 0
    data = json.loads(out)
    assert data["pod"] == "shop/hog"
    assert data["nodes"]["big"]["feasible"] and data["selected"] == "big"


def test_manifest_without_namespace_is_in_default(capsys, cluster_file, tmp_path):
    plain = POD.replace(", namespace: shop", "")
    _, out, _ = explain(capsys, cluster_file, write(tmp_path, "plain.yml", plain))
    assert json.loads(out)["pod"] == "default/new"


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        (POD + "---\n" + POD.replace("name: new", "name: other"),
         ["expected exactly one Pod in the file", "Pod shop/new", "Pod shop/other"]),
        (CLUSTER, ["expected exactly one Pod in the file", "Node small"]),
        ("apiVersion: v1\nkind: Node\nmetadata: {name: n}\n", ["expected exactly one Pod", "Node n"]),
        ("", ["expected exactly one Pod in the file, found no object"]),
        (POD.replace('cpu: "1"', "cpu: lots"), ["Pod shop/new", "spec.containers[0].resources.requests.cpu"]),
        (POD.replace("kind: Pod", "kind: Deployment"), ["expected exactly one Pod", "Deployment"]),
    ],
)
def test_bad_manifest_is_one_error_line_naming_the_file(capsys, cluster_file, tmp_path, text, needles):
    path = write(tmp_path, "bad.yaml", text)
    code, out, err = explain(capsys, cluster_file, path)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert path in err
    for needle in needles:
        assert needle in err


def test_missing_manifest_file_is_an_input_error(capsys, cluster_file, tmp_path):
    path = str(tmp_path / "absent.yaml")
    code, out, err = explain(capsys, cluster_file, path)
    assert code == 2 and out == "" and path in err


def test_manifest_of_another_scheduler_names_the_profiles(capsys, cluster_file, tmp_path):
    other = POD.replace("spec: {", "spec: {schedulerName: other, ")
    code, _, err = explain(capsys, cluster_file, write(tmp_path, "other.yaml", other))
    assert code == 2 and "schedulerName 'other'" in err


@pytest.mark.parametrize(
    ("ref", "is_file"),
    [("shop/web", False), ("web", False), ("pod.yaml", True), ("dir/pod.YML", True), ("x.json", True)],
)
def test_manifest_refs(ref, is_file):
    assert is_manifest_ref(ref) is is_file


def test_an_existing_path_without_suffix_is_a_manifest(tmp_path):
    path = tmp_path / "podfile"
    path.write_text(POD)
    assert is_manifest_ref(str(path))
