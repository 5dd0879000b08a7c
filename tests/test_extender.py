"""Extender mode over an in-memory cluster: the wire format, the verbs, the HTTP endpoints, the metrics.

The same endpoints answer a real kube-scheduler v1.20.2 in tests/test_extender_kube.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import orjson
import pytest
from aiohttp import web
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scorer.assembly import assemble
from scorer.cluster.memory import InMemoryCluster
from scorer.errors import InputError
from scorer.extender import BadRequest, Extender, PluginFailure, extender_scores, read_args
from scorer.extender import front as extender_front
from scorer.extender import http as extender_http
from scorer.extender.extender import UNKNOWN_NODE_SCORE, ScoreAhead
from scorer.extender.wire import MAX_NODE_NAME, HashIndex, NameList, NodeNames, PodCache, filter_result, node_name_error
from scorer.framework import CycleState
from scorer.kube.reflector import EXTENDER_WATCH_COALESCE, WATCH_COALESCE
from scorer.model import Pod, pod_from_dict
from scorer.registry import build_registry
from scorer.service import app as service_app
from scorer.service import run as service_run
from scorer.service.app import Service
from scorer.service.build import build_service, check_extender_options
from scorer.service.options import ServiceOptions
from scorer.sources import MetricsSnapshot, SourceArgs, SourceHub
from scorer.testing import make_node, make_pod

PROFILE = "scorer-extender"
CONFIG: dict[str, Any] = {
    "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
    "profiles": [
        {"schedulerName": "default-scheduler"},
        {"schedulerName": PROFILE,
         "plugins": {"multiPoint": {"enabled": [{"name": "PrioritySort"}, {"name": "DefaultBinder"},
                                                {"name": "LoadAware", "weight": 3},
                                                {"name": "NetworkTraffic", "weight": 2}],
                                    "disabled": [{"name": "*"}]}},
         "pluginConfig": [{"name": "LoadAware", "args": {"usageThresholds": {"cpu": 90}}}]},
    ],
}
# busy: CPU above the 90% threshold; idle: little CPU and traffic; loud: little CPU, much traffic.
SNAPSHOT = MetricsSnapshot({
    "cpu_utilization": {"busy": (0.95, 0.0), "idle": (0.10, 0.0), "loud": (0.15, 0.0), "half": (0.50, 0.0)},
    "network_receive_bytes_per_second": {"busy": (1e6, 0.0), "idle": (1e5, 0.0), "loud": (9e7, 0.0),
                                         "half": (1e6, 0.0)},
}, "test snapshot")
NODES = ("busy", "idle", "loud", "half")


def api_pod(name: str = "web-1", cpu: str = "500m") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"schedulerName": "default-scheduler",
                     "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]}}


def api_node(name: str) -> dict[str, Any]:
    alloc = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": alloc, "capacity": alloc}}


def body(names: list[str], *, cache_capable: bool = True, pod: dict[str, Any] | None = None) -> bytes:
    if cache_capable:
        return orjson.dumps({"Pod": pod or api_pod(), "Nodes": None, "NodeNames": names})
    return orjson.dumps({"Pod": pod or api_pod(), "Nodes": {"metadata": {}, "items": [api_node(n) for n in names]},
                         "NodeNames": None})


def make_assembly(snapshot: MetricsSnapshot = SNAPSHOT, config: dict[str, Any] = CONFIG, *, start: bool = True):
    """The assembly over the in-memory cluster, its nodes loaded (``start``; a service starts it itself)."""
    cluster = InMemoryCluster([make_node(n, cpu="4", memory="16Gi") for n in NODES], [], [])
    asm = assemble(config, cluster, registry=build_registry(), metrics_snapshot=snapshot)
    if start:
        cluster.start(asm.handlers)
    return asm, cluster


def make_extender(**kwargs) -> Extender:
    asm, _ = make_assembly(**kwargs)
    return Extender(asm.frameworks[PROFILE], asm.cache, asm.sources, keep=5)


# -- the wire format -------------------------------------------------------------------------


def test_args_are_read_in_both_forms_and_keys_in_any_case():
    names = read_args(body(["idle", "busy"]))
    assert names.pod.key == "default/web-1" and names.node_names == ("idle", "busy") and names.nodes is None
    whole = read_args(body(["idle", "busy"], cache_capable=False))
    assert whole.node_names == ("idle", "busy") and whole.nodes is not None and len(whole.nodes) == 2
    lower = read_args(orjson.dumps({"pod": api_pod(), "nodenames": ["idle"]}))  # Go matches any case
    assert lower.node_names == ("idle",)
    empty = read_args(orjson.dumps({"Pod": api_pod(), "Nodes": None, "NodeNames": None}))
    assert empty.node_names == ()


def args_with(**fields: Any) -> bytes:
    return orjson.dumps({"Pod": api_pod(), **fields})


def pod_with(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": spec}


LONG = "n" * 50_000


@pytest.mark.parametrize(("raw", "message"), [
    (b"{not json", "the request body is not JSON"),
    (b"[1, 2]", "must be a JSON object (ExtenderArgs), got list"),
    (orjson.dumps({"NodeNames": ["a"]}), "Pod: required"),
    (orjson.dumps({"Pod": "x", "NodeNames": ["a"]}), 'Pod: expected an object (a v1 Pod), got string "x"'),
    # wrong JSON types in the Pod: its field path, never an empty pod
    (orjson.dumps({"Pod": {"metadata": {"name": "p"}, "spec": {"containers": "x"}}, "NodeNames": []}),
     "Pod default/p (the request's Pod): spec.containers: expected a list, got string"),
    (orjson.dumps({"Pod": {"metadata": {"name": "p"}, "spec": "x"}, "NodeNames": []}),
     "Pod default/p (the request's Pod): spec: expected an object, got string \"x\""),
    (orjson.dumps({"Pod": pod_with(containers={}), "NodeNames": []}),
     "Pod default/p (the request's Pod): spec.containers: expected a list, got object"),
    (orjson.dumps({"Pod": {"metadata": {"name": "p", "deletionTimestamp": 7}}, "NodeNames": []}),
     "metadata.deletionTimestamp: expected a string, got integer 7"),
    # NodeNames: the list, each entry's type, each name (the index named, a long name shortened)
    (args_with(NodeNames="a"), 'NodeNames: expected a list of node names, got string "a"'),
    (args_with(NodeNames={}), "NodeNames: expected a list of node names, got object"),
    (args_with(NodeNames=["a", "b", 1]), "NodeNames[2]: expected a string, got integer 1"),
    (args_with(NodeNames=["a", ["b"]]), "NodeNames[1]: expected a string, got list"),
    (args_with(NodeNames=["a", "b", "c", "Node_1"]), 'NodeNames[3]: "Node_1": a lowercase RFC 1123 subdomain'),
    (args_with(NodeNames=["a", ""]), "NodeNames[1]: required"),
    (args_with(NodeNames=["a-", "b"]), 'NodeNames[0]: "a-": a lowercase RFC 1123 subdomain'),
    (args_with(NodeNames=["a..b"]), 'NodeNames[0]: "a..b": a lowercase'),
    (args_with(NodeNames=["a\nb"]), 'NodeNames[0]: "a\\nb": a lowercase'),
    (args_with(NodeNames=["a", LONG]), f"NodeNames[1]: \"{'n' * 77}...\" (50000 characters): must be no more than "
                                       "253 characters"),
    # the Nodes form
    (args_with(Nodes={"items": [{"metadata": {}}]}), "Nodes.items[0].metadata.name: required"),
    (args_with(Nodes={"items": [{"metadata": {"name": "A"}}]}), 'Nodes.items[0].metadata.name: "A": a lowercase'),
    (args_with(Nodes={"items": [{"metadata": {"name": 5}}]}), "Nodes.items[0].metadata.name: expected a string"),
    (args_with(Nodes={"items": ["x"]}), 'Nodes.items[0]: expected a Node object, got string "x"'),
    (args_with(Nodes={"items": [{"metadata": "x"}]}), "Nodes.items[0].metadata: required"),
    (args_with(Nodes={"items": {}}), "Nodes.items: expected a list of Node objects, got object"),
    (args_with(Nodes=[]), "Nodes: expected a NodeList object"),
])
def test_requests_that_cannot_be_read_say_why(raw, message):
    for names in (None, NodeNames()):
        with pytest.raises(BadRequest) as info:
            read_args(raw, PodCache(), names)
        assert message in str(info.value)
        assert len(str(info.value)) < 400  # (a 50,000-character name is not repeated)


def test_node_names_are_dns_subdomains_of_at_most_253_characters():
    for good in ("a", "node-1", "ip-10-0-0-1.ec2.internal", "xn--bcher-kva.example", "a" * MAX_NODE_NAME, "1"):
        assert node_name_error(good) is None, good
    for bad in ("", "A", "a_b", "-a", "a-", ".a", "a.", "a..b", "a.-b", "a-.b", "a b", "ä", "a\n", "a" * 254):
        assert node_name_error(bad) is not None, bad


def test_the_hash_index_finds_each_kept_hash_and_no_other():
    index = HashIndex()
    # hashes sharing their low bits take the slots after their first one; negative ones too
    kept = [0, 1, 1 << 40, (1 << 40) + 1, 2 << 40, -1 << 40, -7, 2**63 - 1, -(2**63)]
    for id_, hash_value in enumerate(kept):
        index.add(hash_value, id_)
    for id_ in range(len(kept), 1_000):  # (it grows: at most an eighth full)
        kept.append((id_ * 0x9E3779B97F4A7C15) % 2**64 - 2**63)
        index.add(kept[-1], id_)
    assert 8 * index.count <= len(index.slots)
    asked = np.array([*kept, 3 << 40, 2, -8], dtype=np.int64)  # (the last three not kept)
    assert index.find(asked).tolist() == [*range(len(kept)), -1, -1, -1]
    assert index.find(np.array([], dtype=np.int64)).tolist() == []
    index.clear()
    assert index.count == 0 and index.find(asked).tolist() == [-1] * len(asked)


def test_long_arrays_of_names_are_found_by_their_hashes_as_short_ones_by_the_dict(monkeypatch):
    names = NodeNames()
    many = [f"node-{i:05d}" for i in range(2 * NodeNames.INDEXED)]
    ids = names.ids(many, "NodeNames[{}]")
    assert ids is not None and ids.tolist() == list(range(len(many)))
    shuffled = many[::-1]
    looked_up: list[int] = []  # (how many hashes each use of the index looked up)
    find = names._index.find
    monkeypatch.setattr(names._index, "find", lambda hashes: looked_up.append(len(hashes)) or find(hashes))
    for asked in (shuffled, shuffled[:NodeNames.INDEXED], shuffled[:NodeNames.INDEXED - 1]):  # index, index, dict
        found = names.ids(orjson.loads(orjson.dumps(asked)), "NodeNames[{}]")  # (new strings, as a request's)
        assert found is not None and found.tolist() == [many.index(name) for name in asked]
    assert looked_up == [len(many), NodeNames.INDEXED]
    again = names.ids([*shuffled, "node-new"], "NodeNames[{}]")  # a new name among them: checked and kept
    assert again is not None and again.tolist() == [*range(len(many) - 1, -1, -1), len(many)]
    with pytest.raises(BadRequest, match="NodeNames\\[3\\]: expected a string, got integer 7"):
        names.ids([*many[:3], 7, *many[3:]], "NodeNames[{}]")
    with pytest.raises(BadRequest, match="NodeNames\\[0\\]: expected a string, got list"):
        names.ids([["a"], *many], "NodeNames[{}]")
    names._drop_all()  # (everything dropped: learnt again)
    assert names.ids(shuffled, "NodeNames[{}]").tolist() == list(range(len(many)))


def test_node_names_are_kept_within_a_byte_budget():
    names = NodeNames()
    names.MAX_BYTES = 64 * 1024  # (16 MiB by default)
    batch = [f"node-{i:05d}" for i in range(100)]
    assert names.check(batch, "NodeNames[{}]") == tuple(batch) and len(names) == 100
    assert names.check(batch, "NodeNames[{}]") == tuple(batch)  # (the second time from what is kept)
    for start in range(0, 20_000, 1_000):  # many more new names than fit: what is kept stays within the budget
        names.check([f"{'x' * 200}-{i}" for i in range(start, start + 1_000)], "NodeNames[{}]")
        assert 0 < names.kept_bytes <= names.MAX_BYTES and len(names) <= names.MAX_BYTES // names.ENTRY_BYTES
    before = len(names)
    with pytest.raises(BadRequest, match="NodeNames\\[1\\]"):
        names.check(["ok", LONG, "Bad"], "NodeNames[{}]")
    assert LONG not in names and "Bad" not in names and len(names) <= before + 1


def test_results_are_written_pascal_case_in_the_form_asked():
    args = read_args(body(["idle", "busy", "half"], cache_capable=False))
    result = filter_result(args, ["idle", "half"], {"busy": "too busy"}, {})
    assert set(result) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    assert result["NodeNames"] is None and [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["idle", "half"]
    assert result["Nodes"]["items"][0] == api_node("idle")  # the objects as they were sent
    by_name = filter_result(read_args(body(["idle", "busy"])), ["idle"], {"busy": "too busy"}, {})
    assert by_name["NodeNames"] == ["idle"] and by_name["Nodes"] is None


def test_a_pod_is_decoded_once_per_content_and_only_a_small_one_is_kept():
    pods = PodCache()
    raw = api_pod()
    raw["metadata"]["resourceVersion"] = "7"
    first = read_args(orjson.dumps({"Pod": raw, "NodeNames": ["idle"]}), pods).pod
    assert read_args(orjson.dumps({"Pod": raw, "NodeNames": []}), pods).pod is first  # filter, then prioritize
    raw["metadata"]["resourceVersion"] = "8"
    raw["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    changed = read_args(orjson.dumps({"Pod": raw, "NodeNames": []}), pods).pod
    assert changed is not first and changed.non_zero_cpu == 2000
    # the same uid and resourceVersion with other content is decoded again, and refused if it must be
    for spec, problem in (("x", "spec: expected an object"), ({"containers": {}}, "spec.containers: expected a list")):
        with pytest.raises(BadRequest, match=problem):
            read_args(orjson.dumps({"Pod": {**raw, "spec": spec}, "NodeNames": []}), pods)
    # a pod larger than MAX_POD_BYTES is decoded every time and not kept; at most SIZE pods are kept
    big = {**raw, "metadata": {**raw["metadata"], "annotations": {"a": "x" * PodCache.MAX_POD_BYTES}}}
    assert read_args(orjson.dumps({"Pod": big}), pods).pod is not read_args(orjson.dumps({"Pod": big}), pods).pod
    for i in range(PodCache.SIZE * 2):
        read_args(orjson.dumps({"Pod": api_pod(f"p-{i}")}), pods)
    assert len(pods) == PodCache.SIZE
    deep = b'{"Pod":' + orjson.dumps(raw)[:-1] + b',"x":' + b'{"d":' * 300 + b"{}" + b"}" * 300 + b"}}"
    assert read_args(deep, pods).pod.name == "web-1"  # (nested deeper than orjson writes: decoded, not kept)


def test_a_pod_the_watch_holds_is_built_from_it_where_only_a_binding_tells_them_apart():
    raw = api_pod()
    raw["metadata"]["resourceVersion"] = "7"
    watched = {"default/web-1": pod_from_dict(raw)}
    asked: list[str] = []

    def watch(key: str) -> Pod | None:
        asked.append(key)
        return watched.get(key)

    pods = PodCache(watch)
    newer = {**raw, "metadata": {**raw["metadata"], "resourceVersion": "8"}, "status": {"phase": "Pending"}}
    pod = read_args(orjson.dumps({"Pod": newer, "NodeNames": []}), pods).pod
    assert pod == pod_from_dict(newer) and pod.resource_version == "8" and asked == ["default/web-1"]
    assert pod.containers is watched["default/web-1"].containers  # (built from the watch's, not decoded)
    # other content under the same name is decoded, and refused if it must be
    changed = {**newer, "spec": {**raw["spec"], "containers": [{"name": "c", "image": "pause",
                                                                "resources": {"requests": {"cpu": "2"}}}]}}
    assert read_args(orjson.dumps({"Pod": changed}), pods).pod.non_zero_cpu == 2000
    with pytest.raises(BadRequest, match="spec: expected an object"):
        read_args(orjson.dumps({"Pod": {**newer, "spec": "x"}}), pods)
    # another kind or apiVersion is refused as before, without asking the watch; no namespace is "default"
    asked.clear()
    for field, value in (("kind", "Node"), ("apiVersion", "v2")):
        with pytest.raises(BadRequest, match=field):
            read_args(orjson.dumps({"Pod": {**newer, field: value}}), pods)
    assert asked == []
    bare = {**newer, "metadata": {key: value for key, value in newer["metadata"].items() if key != "namespace"}}
    bare["metadata"]["uid"] = "uid-bare"  # (a pod not kept yet)
    assert read_args(orjson.dumps({"Pod": bare}), pods).pod.key == "default/web-1" and asked == ["default/web-1"]
    # a pod the watch holds bound (no binding to tell apart) is decoded
    watched["default/web-1"] = pod_from_dict({**raw, "spec": {**raw["spec"], "nodeName": "idle"}})
    again = {**newer, "metadata": {**newer["metadata"], "resourceVersion": "9"}}
    assert read_args(orjson.dumps({"Pod": again}), pods).pod == pod_from_dict(again)


def test_a_pod_whose_json_the_watch_decoded_is_taken_from_it_without_reading_the_head(monkeypatch):
    raw = {k: v for k, v in api_pod().items() if k not in ("kind", "apiVersion")}  # (as kube-scheduler writes it)
    raw["metadata"]["resourceVersion"] = "7"
    watched = pod_from_dict(raw)
    asked: list[bytes] = []

    def by_json(data: bytes) -> Pod | None:
        asked.append(bytes(data))
        return watched if bytes(data) == orjson.dumps(raw) else None

    pods, names, found = PodCache(None, by_json), NodeNames(), []
    pods.on_by_json = lambda: found.append(1)
    decoded: list[Any] = []
    monkeypatch.setattr(PodCache, "decode", lambda self, obj: decoded.append(obj) or pod_from_dict(obj))
    filtered = read_args(body(["idle", "half"], pod=raw), pods, names)  # kube-scheduler's filter
    assert filtered.pod is watched and filtered.node_names == ("idle", "half") and filtered.kept is not None
    assert asked == [orjson.dumps(raw)] and found == [1] and decoded == []
    # its prioritize: the same head, the names kept (nothing asked again)
    again = read_args(body(["half"], pod=raw), pods, names)
    assert again.pod is watched and again.node_names == ("half",) and len(asked) == 1
    # a pod of other bytes (another version; the same content written otherwise) is decoded as before
    newer = {**raw, "metadata": {**raw["metadata"], "resourceVersion": "8"}}
    assert read_args(body(["idle"], pod=newer), pods, names).pod.resource_version == "8" and len(decoded) == 1
    spaced = b'{"Pod":' + orjson.dumps(raw, option=orjson.OPT_INDENT_2) + b',"Nodes":null,"NodeNames":["idle"]}'
    assert read_args(spaced, PodCache(None, by_json), names).pod == watched and len(decoded) == 2
    # the names are checked as ever; names that are not an array: the body is read whole, and refused
    with pytest.raises(BadRequest, match=r"NodeNames\[1\]: expected a string"):
        read_args(body(["idle", 7], pod=raw), PodCache(None, by_json), names)  # type: ignore[list-item]
    broken = b'{"Pod":' + orjson.dumps(raw) + b',"Nodes":null,"NodeNames":[1,]}'
    with pytest.raises(BadRequest, match="not JSON"):
        read_args(broken, PodCache(None, by_json), names)


def test_the_priority_list_is_written_as_json():
    names = NodeNames()
    hosts, scores = ["a", "b.c", "d-1"], [0, 5, 10]
    names.check(hosts, "NodeNames[{}]")
    for _ in range(2):  # the second time from the kept prefixes
        assert orjson.loads(names.write_priorities(hosts, scores)) == [
            {"Host": "a", "Score": 0}, {"Host": "b.c", "Score": 5}, {"Host": "d-1", "Score": 10}]
    assert names.write_priorities([], []) == b"[]"
    # names not checked are written, not kept; a score outside 0-10 is written as it is; the lengths must agree
    assert orjson.loads(names.write_priorities(['quote"d', "a"], [10, 11])) == [{"Host": 'quote"d', "Score": 10},
                                                                                {"Host": "a", "Score": 11}]
    assert len(names) == 3
    with pytest.raises(ValueError, match="2 names and 1 scores"):
        names.write_priorities(["a", "b"], [1])


def test_an_array_of_names_sent_again_is_neither_decoded_nor_checked_again():
    names, pods = NodeNames(), PodCache()
    first = read_args(body(["idle", "busy"]), pods, names)
    assert first.kept is not None and first.node_names == ("idle", "busy")
    again = read_args(body(["idle", "busy"], pod=api_pod("web-2")), pods, names)
    assert again.kept is first.kept and again.node_names is first.node_names and again.pod.name == "web-2"
    # kube-scheduler's encoder may end the body with a newline; another order of the same names is another array
    assert read_args(body(["idle", "busy"]) + b"\n", pods, names).kept is first.kept
    assert read_args(body(["busy", "idle"]), pods, names).kept is not first.kept


def test_a_body_with_a_head_and_names_read_before_is_not_read_again(monkeypatch):
    names, pods = NodeNames(), PodCache()
    filtered = read_args(body(["idle", "busy", "half"]), pods, names)
    passed = names.keep_list(orjson.dumps(["idle", "half"]), ("idle", "half"), np.array([0, 2]))
    decoded: list[object] = []
    monkeypatch.setattr(pods, "decode", decoded.append)
    prioritized = read_args(body(["idle", "half"]), pods, names)  # (kube-scheduler's prioritize after its filter)
    assert prioritized.pod is filtered.pod and prioritized.kept is passed and decoded == []
    # names not kept: the head's pod all the same, the names read
    assert read_args(body(["idle", "half"]), pods, NodeNames()).pod is filtered.pod and decoded == []
    monkeypatch.undo()
    other = read_args(body(["idle", "half"], pod=api_pod("web-2")), pods, names)  # another head: read
    assert other.pod.name == "web-2" and other.kept is passed
    for i in range(PodCache.HEADS):  # at most HEADS heads kept
        read_args(body(["idle", "half"], pod=api_pod(f"web-{i + 3}")), pods, names)
    monkeypatch.setattr(pods, "decode", decoded.append)
    assert read_args(body(["idle", "half"]), pods, names).pod is None and len(decoded) == 1  # (dropped: read)


@pytest.mark.parametrize("raw", [
    # the array's pattern inside a string, in a nested object last, keys in another order or case, white space
    orjson.dumps({"Pod": {**api_pod(), "x": ',"NodeNames":["busy"]}'}, "Nodes": None, "NodeNames": ["idle", "half"]}),
    orjson.dumps({"Pod": api_pod(), "NodeNames": ["idle", "half"], "x": [{"a": 1, "NodeNames": ["busy"]}]}),
    orjson.dumps({"NodeNames": ["busy"], "Pod": api_pod(), "nodenames": ["idle", "half"]}),
    orjson.dumps({"Pod": api_pod(), "x": {"NodeNames": ["busy"]}, "NodeNames": ["idle", "half"]}),
    b'{"Pod": ' + orjson.dumps(api_pod()) + b', "NodeNames": ["idle", "half"]}',
    orjson.dumps({"Pod": api_pod(), "NODENAMES": ["busy"], "NodeNames": ["idle", "half"]}),
])
def test_names_are_those_of_the_last_top_level_key_however_the_body_is_written(raw):
    names, pods = NodeNames(), PodCache()
    for cache in (PodCache(), pods, pods):  # (then from the kept array and head, where the body allows it)
        args = read_args(raw, cache, names)
        assert args.node_names == ("idle", "half") and args.pod.name == "web-1" and args.nodes is None


@pytest.mark.parametrize("raw", [
    b'{"Pod":' + orjson.dumps(api_pod()) + b',"NodeNames":["idle"]]}',  # one bracket too many
    b'{"Pod":' + orjson.dumps(api_pod())[:-1] + b',"NodeNames":["idle"]}',  # the Pod not closed
    b'[{"Pod":' + orjson.dumps(api_pod()) + b',"NodeNames":["idle"]}',
])
def test_a_body_that_only_looks_like_kube_schedulers_is_refused_as_before(raw):
    names = NodeNames()
    read_args(body(["idle"]), PodCache(), names)  # (the array ["idle"] kept)
    with pytest.raises(BadRequest, match="the request body is not JSON"):
        read_args(raw, PodCache(), names)


def test_name_arrays_kept_are_bounded_and_dropped_with_the_names():
    names = NodeNames()
    for i in range(NodeNames.LISTS + 3):
        read_args(body([f"n-{i}", "idle"]), PodCache(), names)
    assert len(names._lists) == NodeNames.LISTS  # the least recently used dropped
    names = NodeNames()
    names.LIST_BYTES = 600  # (8 MiB by default)
    for i in range(6):  # each counted as its JSON and LIST_ENTRY_BYTES per name
        read_args(body([f"n-{i}", "idle"]), PodCache(), names)
        assert names.list_bytes <= names.LIST_BYTES
    fitting = names.LIST_BYTES // (len(b'["n-0","idle"]') + 2 * names.LIST_ENTRY_BYTES)
    assert len(names._lists) == fitting
    large = read_args(body([f"node-{i}" for i in range(50)]), PodCache(), names)  # larger than LIST_BYTES
    assert large.kept is not None and len(names._lists) == fitting and large.kept not in names._lists.values()
    kept = read_args(body(["idle"]), PodCache(), names).kept
    generation = names.generation
    names.MAX_BYTES = names.kept_bytes  # the next new name drops every name kept, and the arrays with them
    read_args(body(["new-one"]), PodCache(), names)
    assert names.generation == generation + 1 and names.current_ids(kept) is None
    assert read_args(body(["idle"]), PodCache(), names).kept is not kept


def test_kept_entries_are_written_as_the_priority_list():
    names = NodeNames()
    args = read_args(body(["a", "b.c", "d-1"]), PodCache(), names)
    for scores in ([0, 5, 10], [0, 5, 10], [3, 3, 3]):
        assert names.write_kept(args, scores) == names.write_priorities(args.node_names, scores) == orjson.dumps(
            [{"Host": host, "Score": score} for host, score in zip(args.node_names, scores, strict=True)])
    assert orjson.loads(names.write_kept(args, [11, -1, 0])) == [  # (outside 0-10: written as they are)
        {"Host": "a", "Score": 11}, {"Host": "b.c", "Score": -1}, {"Host": "d-1", "Score": 0}]
    assert names.write_kept(read_args(body([]), PodCache(), names), []) == b"[]"
    other = read_args(body(["a", "b.c", "d-1"]), PodCache(), NodeNames())  # ids of another NodeNames: not used
    assert names.write_kept(other, [1, 2, 3]) == names.write_priorities(other.node_names, [1, 2, 3])


def test_prioritize_reads_the_names_the_filter_passed_from_its_answer():
    asm, cluster = make_assembly()
    extender = Extender(asm.frameworks[PROFILE], asm.cache, asm.sources)
    pods, names = PodCache(), extender.names
    passed, failed, _ = extender.filter(read_args(body(["busy", "idle", "new", "half"]), pods, names))
    assert passed == ["idle", "new", "half"] and list(failed) == ["busy"]
    # kube-scheduler prioritizes what the filter passed, in its order: that array is kept, with its ids
    updated = api_pod(cpu="2")  # (the pod changed in between: decoded again, never the stale one)
    updated["metadata"]["resourceVersion"] = "9"
    args = read_args(body(passed, pod=updated), pods, names)
    assert args.kept is not None and names.current_ids(args.kept) is not None and args.pod.non_zero_cpu == 2000
    fresh = Extender(asm.frameworks[PROFILE], asm.cache, asm.sources)  # the same request, nothing kept
    expected = fresh.prioritize(read_args(body(passed, pod=updated)))
    assert extender.prioritize(args) == expected and expected[1] == UNKNOWN_NODE_SCORE
    # a node removed: the table's rows move, the rows by id are made again
    cluster.delete(asm.cache.table.nodes[asm.cache.table.index["idle"]])
    cluster.apply(make_node("idle-2", cpu="4", memory="16Gi"))
    expected = fresh.prioritize(read_args(body(passed, pod=updated)))
    assert extender.prioritize(read_args(body(passed, pod=updated), pods, names)) == expected
    assert expected[0] == UNKNOWN_NODE_SCORE


async def test_the_endpoints_answer_as_before_when_names_are_kept(aiohttp_client):
    service = make_service()
    client = await aiohttp_client(service.app())
    # (every name known: the filter's passing names by the positions it rejected; "new": by name)
    for requested in (["busy", "idle", "half"], ["busy", "idle", "new", "half"]) * 2:  # (the second time kept)
        filtered = await (await client.post("/scheduler/filter", data=body(requested))).read()
        passed = orjson.loads(filtered)["NodeNames"]
        assert passed == [name for name in requested if name != "busy"]
        prioritized = await (await client.post("/scheduler/prioritize", data=body(passed))).read()
        extender = Extender(service.asm.frameworks[PROFILE], service.asm.cache, service.asm.sources)
        args = read_args(body(requested))
        assert filtered == orjson.dumps(filter_result(args, *extender.filter(args)))
        args = read_args(body(passed))
        assert prioritized == NodeNames().write_priorities(args.node_names, extender.prioritize(args))
    text = await (await client.get("/metrics")).text()
    assert samples(text, "scorer_extender_unknown_nodes_total")[()] == 4  # "new", in each of its requests


def name_list(names: NodeNames, *listed: str) -> NameList:
    return names.keep_list(orjson.dumps(list(listed)), listed, names.ids(list(listed), "NodeNames[{}]"))


def test_an_answer_computed_ahead_is_used_only_for_the_pod_and_names_filter_passed():
    now = [0.0]
    ends: list[str] = []  # what ScoreAhead counts: "used" or "unused" per answer
    ahead, names = ScoreAhead(ends.append, clock=lambda: now[0]), NodeNames()

    def counts() -> tuple[int, int, bool]:
        return ends.count("used"), ends.count("unused"), ahead.enabled

    pod, other = pod_from_dict(api_pod("a")), pod_from_dict(api_pod("b"))
    passed, single = name_list(names, "n1", "n2"), name_list(names, "n1")
    # off until kube-scheduler is seen asking prioritize about what its filter passed
    assert not ahead.filtered(pod, passed)
    assert ahead.take(pod, passed) is None and ahead.enabled
    assert ahead.filtered(pod, passed) and ahead.wanted(pod, passed)
    ahead.store(pod, passed, b"[1]")
    assert ahead.take(pod, passed) == (b"[1]", 0) and counts() == (1, 0, True)
    assert not ahead.wanted(pod, passed)
    ahead.store(pod, passed, b"[late]")  # (taken already: a computation that ends late is not kept)
    # a prioritize of another pod, or of other names: computed as usual, and computing ahead stops ...
    assert ahead.filtered(pod, passed)
    ahead.store(pod, passed, b"[2]")
    assert ahead.take(other, passed) is None and counts() == (1, 1, False)
    assert not ahead.filtered(pod, passed)
    assert ahead.take(pod, passed) is None and ahead.enabled  # ... until one follows its filter again
    assert ahead.filtered(pod, passed)
    ahead.store(pod, passed, b"[3]")
    assert ahead.take(pod, name_list(names, "n2", "n1")) is None and (ends.count("unused"), ahead.enabled) == (2, False)
    # too old: computed again (kube-scheduler did follow, so it stays on)
    assert not ahead.filtered(pod, passed) and ahead.take(pod, passed) is None
    assert ahead.filtered(pod, passed)
    ahead.store(pod, passed, b"[4]")
    now[0] += ScoreAhead.MAX_AGE + 0.1
    assert ahead.take(pod, passed) is None and counts() == (1, 3, True)
    # one node passing, names not kept, decisions kept: nothing computed ahead
    assert not ahead.filtered(pod, single) and not ahead.filtered(pod, None)
    assert not ahead.filtered(pod, passed, keeping_decisions=True)
    # a filter not followed by prioritize: the answer is dropped and computing ahead stops
    assert ahead.filtered(pod, passed)
    ahead.store(pod, passed, b"[5]")
    assert not ahead.filtered(other, passed) and (ends.count("unused"), ahead.enabled) == (4, False)
    assert ahead.take(other, passed) is None and ahead.enabled
    # another request before the computation ran: it is not kept
    assert ahead.filtered(pod, passed)
    assert ahead.filtered(other, passed) and not ahead.wanted(pod, passed)
    ahead.store(pod, passed, b"[6]")
    assert ahead.take(pod, passed) is None and ends.count("used") == 1


async def test_prioritize_is_answered_from_what_was_computed_once_filter_answered(aiohttp_client, monkeypatch):
    service = make_service()
    client = await aiohttp_client(service.app())

    async def pair(pod: dict[str, Any], prioritize: bool = True) -> tuple[bytes, bytes | None]:
        filtered = await (await client.post("/scheduler/filter", data=body(["busy", "idle", "half"], pod=pod))).read()
        await asyncio.sleep(0)
        if not prioritize:
            return filtered, None
        passed = orjson.loads(filtered)["NodeNames"]
        return filtered, await (await client.post("/scheduler/prioritize", data=body(passed, pod=pod))).read()

    async def counted() -> dict[tuple[tuple[str, str], ...], float]:
        return samples(await (await client.get("/metrics")).text(), "scorer_extender_scored_ahead_total")

    assert await counted() == {(("result", "used"),): 0, (("result", "unused"),): 0}
    extender = Extender(service.asm.frameworks[PROFILE], service.asm.cache, service.asm.sources)
    for i in range(3):
        pod = api_pod(f"web-{i}", cpu=f"{i + 1}00m")
        _, prioritized = await pair(pod)
        args = read_args(body(["idle", "half"], pod=pod))
        assert prioritized == NodeNames().write_priorities(args.node_names, extender.prioritize(args))
    assert await counted() == {(("result", "used"),): 2, (("result", "unused"),): 0}  # (the first turns it on)
    await pair(api_pod("lone"), prioritize=False)  # (kube-scheduler found one node: no prioritize)
    await pair(api_pod("web-3"))  # computed ahead for "lone", unused: off for this one
    await pair(api_pod("web-4"))
    assert await counted() == {(("result", "used"),): 3, (("result", "unused"),): 1}
    # a pod larger than the decoded pods kept is decoded anew for prioritize: one answer computed ahead for
    # it goes unused, then none is computed
    for i in range(3):
        big = api_pod(f"big-{i}")
        big["metadata"]["annotations"] = {"note": "x" * (PodCache.MAX_POD_BYTES + 1)}
        _, prioritized = await pair(big)
        args = read_args(body(["idle", "half"], pod=big))
        assert prioritized == NodeNames().write_priorities(args.node_names, extender.prioritize(args))
    assert await counted() == {(("result", "used"),): 3, (("result", "unused"),): 2}
    # the answer computed ahead is scored in filter's own cycle state: PreFilter runs once for the pair
    await pair(api_pod("web-5"))  # (turns computing ahead on again)
    fwk = service.asm.frameworks[PROFILE]
    states: list[CycleState] = []
    run_pre_filter = fwk.run_pre_filter
    monkeypatch.setattr(fwk, "run_pre_filter",
                        lambda state, *rest: (states.append(state), run_pre_filter(state, *rest))[1])
    pod = api_pod("web-6")
    _, prioritized = await pair(pod)
    assert await counted() == {(("result", "used"),): 4, (("result", "unused"),): 2} and len(states) == 1
    args = read_args(body(["idle", "half"], pod=pod))
    assert prioritized == NodeNames().write_priorities(args.node_names, extender.prioritize(args))


async def test_unknown_names_scored_ahead_are_counted_only_when_their_answer_is_used(aiohttp_client):
    service = make_service()
    client = await aiohttp_client(service.app())

    async def post(verb: str, names: list[str], pod: str) -> list[str] | None:
        response = await client.post(f"/scheduler/{verb}", data=body(names, pod=api_pod(pod)))
        answer = orjson.loads(await response.read())
        await asyncio.sleep(0)
        return answer["NodeNames"] if verb == "filter" else None

    async def unknown() -> float:
        return samples(await (await client.get("/metrics")).text(), "scorer_extender_unknown_nodes_total")[()]

    for i in range(2):  # (the first pair turns computing ahead on; the second is answered from it)
        await post("prioritize", await post("filter", ["idle", "new", "half"], f"p{i}"), f"p{i}")
    assert await unknown() == 4  # "new" in each of the four requests
    await post("filter", ["idle", "new", "half"], "lone")  # scored ahead, never asked: not counted
    assert await unknown() == 5
    passed = await post("filter", ["idle", "new", "half"], "next")
    await post("prioritize", passed, "next")
    assert await unknown() == 7


def test_scores_map_to_the_extender_scale_rounding_half_up():
    # weights 3 + 2: the total's maximum is 500; 0 -> 0, 25 (2.5 of 10... of 500: 0.5) -> 1, 500 -> 10
    totals = np.array([0, 24, 25, 249, 250, 475, 500])
    assert extender_scores(totals, 5).tolist() == [0, 0, 1, 5, 5, 10, 10]
    assert extender_scores(np.array([0, 50, 100]), 1).tolist() == [0, 5, 10]
    assert extender_scores(np.array([7, 8]), 0).tolist() == [0, 0]


# -- the verbs -------------------------------------------------------------------------------


@pytest.mark.parametrize("cache_capable", [True, False])
def test_filter_rejects_busy_nodes_and_passes_unknown_ones(cache_capable):
    extender = make_extender()
    passed, failed, unresolvable = extender.filter(read_args(body(["busy", "idle", "new", "half"],
                                                                  cache_capable=cache_capable)))
    assert passed == ["idle", "new", "half"]  # "new": not in the cache yet, kube-scheduler judged it
    assert failed == {"busy": "node(s) CPU utilization above the LoadAware threshold (90%)"}
    assert unresolvable == {}
    decision = extender.decisions[-1]
    assert decision["verb"] == "filter" and decision["pod"] == "default/web-1" and decision["profile"] == PROFILE
    assert decision["nodes"]["busy"]["filter"]["plugin"] == "LoadAware"
    assert decision["nodes"]["busy"]["metrics"]["cpu_utilization"]["value"] == 0.95
    assert decision["nodes"]["idle"]["feasible"] and decision["nodes"]["new"]["metrics"] == {}


def test_prioritize_prefers_quiet_idle_nodes_and_gives_unknown_ones_the_middle():
    extender = make_extender()
    scores = dict(zip(["loud", "idle", "half", "new"],
                      extender.prioritize(read_args(body(["loud", "idle", "half", "new"]))), strict=True))
    assert scores["new"] == 5
    assert scores["idle"] > scores["half"] and scores["idle"] > scores["loud"]
    assert all(0 <= s <= 10 for s in scores.values())
    decision = extender.decisions[-1]
    idle = decision["nodes"]["idle"]
    assert set(idle["scores"]) == {"LoadAware", "NetworkTraffic"}
    assert idle["total"] == sum(p["weighted"] for p in idle["scores"].values())
    assert idle["extenderScore"] == scores["idle"] == extender_scores(np.array([idle["total"]]), 5)[0]


def test_a_pod_kube_scheduler_bound_counts_in_flight_through_the_watch():
    # kube-scheduler binds; the watch shows the pod bound; the metric plugins count it in flight on its node
    asm, cluster = make_assembly()
    extender = Extender(asm.frameworks[PROFILE], asm.cache, asm.sources, keep=2)
    args = read_args(body(["idle", "half"]))
    before = extender.prioritize(args)
    raw_before = extender.decisions[-1]["nodes"]["idle"]["scores"]["LoadAware"]["raw"]
    for i in range(3):  # seen pending, then bound (a pod that arrives bound is in the metrics already)
        cluster.apply(make_pod(f"bound-{i}", cpu="500m", scheduler_name="another-scheduler"))
        cluster.apply(make_pod(f"bound-{i}", cpu="500m", scheduler_name="another-scheduler", node_name="idle"))
    after = extender.prioritize(args)
    idle = extender.decisions[-1]["nodes"]["idle"]
    assert idle["metrics"]["cpu_utilization"]["inFlightPods"] == 3
    assert idle["scores"]["LoadAware"]["raw"] > raw_before  # 10% measured + three pods' estimates
    assert after[0] < before[0]


def test_a_failing_plugin_fails_the_request_with_its_message():
    asm, _ = make_assembly()
    fwk = asm.frameworks[PROFILE]

    def broken(state, pod, nodes):
        raise RuntimeError("the metric store is on fire")

    fwk._filters = [(plugin, broken) for plugin, _ in fwk._filters]
    with pytest.raises(PluginFailure, match="the metric store is on fire"):
        Extender(fwk, asm.cache).filter(read_args(body(["idle"])))


def test_without_metrics_the_data_policy_decides():
    extender = make_extender(snapshot=MetricsSnapshot({}, "empty"))
    passed, failed, _ = extender.filter(read_args(body(["busy", "idle"])))
    assert passed == ["busy", "idle"] and failed == {}  # onMissing neutral: nothing rejected
    assert extender.prioritize(read_args(body(["busy", "idle"]))) == [5, 5]  # neutral everywhere


# -- the service's endpoints -------------------------------------------------------------------


def make_service(*, no_scheduling=True, debug=False, http_timeout=15.0):
    asm, cluster = make_assembly(start=False)
    options = ServiceOptions(config="", bind_address="127.0.0.1", port=0, extender_profile=PROFILE,
                             no_scheduling=no_scheduling, enable_debug_endpoints=debug, http_timeout=http_timeout)
    return Service(asm, cluster, options)


def test_the_service_finds_a_requests_pod_in_its_pod_watch():
    pod = pod_from_dict(api_pod())
    source = SimpleNamespace(reflectors={"pods": SimpleNamespace(store={"default/web-1": pod})})
    watched = service_app._watched_pods(source)
    assert watched is not None and watched("default/web-1") is pod and watched("default/web-2") is None
    assert service_app._watched_pods(InMemoryCluster([], [], [])) is None  # (no reflectors: every pod decoded)


@contextlib.asynccontextmanager
async def listening(service: Service, *, front: bool = True) -> AsyncIterator[int]:
    """``service``'s application served on 127.0.0.1 as ``scorer run`` serves it: behind the extender's lean
    front (``scorer.service.run.listen``), or with aiohttp alone (not ``front``); its port. (aiohttp_client's
    server cancels a handler whose client went away; this one, as the service's, lets it answer.)"""
    runner = web.AppRunner(service.app(), access_log=None)
    await runner.setup()
    listener = lean = None
    try:
        if front:
            listener, lean = await service_run.listen(runner, service.options, None)
            yield listener.sockets[0].getsockname()[1]
        else:
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            yield runner.addresses[0][1]
    finally:
        service_run.stop_listening(listener, lean)
        await runner.cleanup()


async def exchange(port: int, data: bytes, *, close: bool = False) -> bytes:
    """``data`` written to 127.0.0.1:``port`` over a socket of its own (``close``: then the socket is closed
    soon after); what the server answers until it closes the connection (at most 10 s)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        if close:
            await asyncio.sleep(0.2)  # (the server reads the head and starts on the body first)
            return b""
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


def head(path: str, length: int | None, *extra: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: scorer", "Content-Type: application/json",
             *([f"Content-Length: {length}"] if length is not None else []), *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(s.labels.items())): s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == name}


async def test_the_endpoints_answer_kube_scheduler_and_count_requests(aiohttp_client, monkeypatch):
    monkeypatch.setattr(extender_http, "MAX_BODY", 64 * 1024)  # (128 MiB by default)
    service = make_service(debug=True)
    client = await aiohttp_client(service.app())
    assert service.supervisor.failure is None and service.source.has_synced()
    response = await client.post("/scheduler/filter", data=body(["busy", "idle", "half"]))
    assert response.status == 200
    result = await response.json()
    assert result["NodeNames"] == ["idle", "half"] and list(result["FailedNodes"]) == ["busy"]
    assert result["Error"] == "" and result["FailedAndUnresolvableNodes"] == {}
    response = await client.post("/scheduler/prioritize", data=body(["idle", "half"], cache_capable=False))
    priorities = await response.json()
    assert [p["Host"] for p in priorities] == ["idle", "half"] and priorities[0]["Score"] > priorities[1]["Score"]
    bad = await client.post("/scheduler/filter", data=b"{")
    assert bad.status == 400 and (await bad.json())["Error"].startswith("the request body is not JSON")
    bad = await client.post("/scheduler/prioritize", data=orjson.dumps({"NodeNames": []}))
    assert bad.status == 400 and "Pod: required" in (await bad.json())["Error"]
    huge = await client.post("/scheduler/filter", data=b" " * (extender_http.MAX_BODY + 1))
    assert huge.status == 413 and "larger than" in (await huge.json())["Error"]
    text = await (await client.get("/metrics")).text()
    requests = samples(text, "scorer_extender_requests_total")
    assert requests[(("result", "success"), ("verb", "filter"))] == 1
    assert requests[(("result", "success"), ("verb", "prioritize"))] == 1
    assert requests[(("result", "bad_request"), ("verb", "filter"))] == 2
    assert requests[(("result", "bad_request"), ("verb", "prioritize"))] == 1
    counts = samples(text, "scorer_extender_request_duration_seconds_count")
    assert counts[(("verb", "filter"),)] == 3
    debug = await (await client.get("/debug/extender")).json()
    assert [d["verb"] for d in debug["decisions"]] == ["filter", "prioritize"]
    assert (await client.get("/healthz")).status == 200
    assert "metrics-snapshot" in service.supervisor.tasks  # the snapshot is sampled again while it runs


@pytest.mark.parametrize("front", [True, False], ids=["front", "aiohttp"])
async def test_a_body_is_refused_from_its_length_unread_a_slow_one_cut_and_all_bounded(monkeypatch, caplog, front):
    monkeypatch.setattr(extender_http, "MAX_BODY", 64 * 1024)
    monkeypatch.setattr(extender_front, "MAX_BODY", 64 * 1024)
    service = make_service(http_timeout=0.5)
    async with listening(service, front=front) as port:
        # 200 MB announced and none of it sent: 413 at once (waiting for the body would take the timeout: 408)
        answer = await exchange(port, head("/scheduler/prioritize", 200_000_000))
        assert answer.startswith(b"HTTP/1.1 413") and b"larger than 65536 bytes (Content-Length 200000000)" in answer
        # without a length (chunked), the body is read up to the limit
        chunk = b"x" * 32_768
        chunked = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(3)) + b"0\r\n\r\n"
        answer = await exchange(port, head("/scheduler/filter", None, "Transfer-Encoding: chunked") + chunked)
        assert answer.startswith(b"HTTP/1.1 413") and b"larger than 65536 bytes" in answer
        # a body that stalls: 408 after the timeout, and the connection closed
        answer = await exchange(port, head("/scheduler/filter", 100) + b'{"Pod"')
        assert answer.startswith(b"HTTP/1.1 408") and b"did not arrive within 0.5s" in answer
        # a body cut off (the client goes away): a bad request, no ERROR, no traceback
        await exchange(port, head("/scheduler/prioritize", 100) + b'{"Pod"', close=True)
        # the bodies read at once, all requests together, are bounded: the request that goes over gets 503
        monkeypatch.setattr(extender_http, "MAX_BODIES_READING", 96 * 1024)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(head("/scheduler/prioritize", 60_000) + b" " * 50_000)  # held: 10,000 bytes short
        await asyncio.sleep(0.2)  # (the server reads what came)
        answer = await exchange(port, head("/scheduler/filter", 60_000) + b" " * 60_000)
        assert answer.startswith(b"HTTP/1.1 503") and b"bodies take the 98304 bytes read at once" in answer
        writer.write(b" " * 10_000)
        held = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        assert held.startswith(b"HTTP/1.1 400") and b"not JSON" in held  # (read whole: it was a fair share)
        # a malformed chunk: aiohttp's parser answers 400 (its log line: scorer.service.logs.ClientErrors)
        answer = await exchange(port, head("/scheduler/filter", None, "Transfer-Encoding: chunked") + b"zz\r\nab\r\n")
        assert answer.startswith(b"HTTP/1.0 400")

        def bad_requests() -> dict[str, float]:
            text = generate_latest(service.asm.metrics.collector_registry).decode()
            return {dict(labels)["verb"]: value for labels, value in
                    samples(text, "scorer_extender_requests_total").items() if ("result", "bad_request") in labels}

        async with asyncio.timeout(10):
            while bad_requests()["prioritize"] < 3:
                await asyncio.sleep(0.05)
        assert bad_requests() == {"filter": 3, "prioritize": 3}
        assert not [r for r in caplog.records if r.name.startswith("scorer") and (r.levelno >= logging.ERROR
                                                                                  or r.exc_info)]
        status, _ = await get(port, "/healthz")
        assert status == 200


async def get(port: int, path: str) -> tuple[int, bytes]:
    answer = await exchange(port, f"GET {path} HTTP/1.1\r\nHost: scorer\r\nConnection: close\r\n\r\n".encode())
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


async def test_hostile_node_names_get_400_and_valid_large_requests_are_answered(aiohttp_client):
    service = make_service(debug=True)
    client = await aiohttp_client(service.app())
    for i in range(5):  # 1,000 names of 50,000 characters: refused, nothing kept
        hostile = orjson.dumps({"Pod": api_pod(), "NodeNames": [f"{i}{j}" + "n" * 49_990 for j in range(1_000)]})
        response = await client.post("/scheduler/prioritize", data=hostile)
        assert response.status == 400
        assert "NodeNames[0]: " in (await response.json())["Error"] and "must be no more than 253" in \
            (await response.json())["Error"]
    response = await client.post("/scheduler/filter", data=body(["idle", "Not_A_Node"]))
    assert response.status == 400 and (await response.json())["Error"].startswith('NodeNames[1]: "Not_A_Node"')
    names = [*NODES, *(f"node-{i}.example.com" for i in range(2_000))]  # 2,000 the cache does not know
    response = await client.post("/scheduler/prioritize", data=body(names))
    priorities = await response.json()
    assert response.status == 200 and [p["Host"] for p in priorities] == names
    assert {p["Score"] for p in priorities[len(NODES):]} == {5}
    response = await client.post("/scheduler/filter", data=body(names))
    assert response.status == 200 and (await response.json())["NodeNames"] == [n for n in names if n != "busy"]
    # /debug/extender keeps the first DECISION_NODES nodes of a decision
    decisions = (await (await client.get("/debug/extender")).json())["decisions"]
    assert [len(d["nodes"]) for d in decisions] == [1_000, 1_000]
    assert [d["nodesOmitted"] for d in decisions] == [len(names) - 1_000] * 2


async def test_a_plugin_failure_is_an_error_result_not_a_crash(aiohttp_client):
    service = make_service()
    client = await aiohttp_client(service.app())
    fwk = service.asm.frameworks[PROFILE]

    def broken(state, pod, nodes):
        raise RuntimeError("boom")

    fwk._filters = [(plugin, broken) for plugin, _ in fwk._filters]
    fwk._scores = [(plugin, broken, normalize) for plugin, _, normalize in fwk._scores]
    filtered = await client.post("/scheduler/filter", data=body(["idle"]))
    assert filtered.status == 200 and "RuntimeError: boom" in (await filtered.json())["Error"]
    prioritized = await client.post("/scheduler/prioritize", data=body(["idle", "half"]))
    assert prioritized.status == 500 and "RuntimeError: boom" in (await prioritized.json())["Error"]
    assert (await client.post("/scheduler/filter", data=body(["idle"]))).status == 200  # still serving
    text = await (await client.get("/metrics")).text()
    assert samples(text, "scorer_extender_requests_total")[(("result", "error"), ("verb", "filter"))] == 2


async def test_no_scheduling_binds_nothing(aiohttp_client):
    service = make_service(no_scheduling=True)
    client = await aiohttp_client(service.app())
    cluster = service.source
    cluster.apply(make_pod("pending", cpu="100m"))
    assert (await client.post("/scheduler/filter", data=body(["idle"]))).status == 200
    await asyncio.sleep(0.3)  # (a scheduling loop binds a pending pod within milliseconds)
    assert not service.scheduling and "scheduling-loop" not in service.supervisor.tasks
    assert all(not pod.node_name for pod in cluster.pods.values())


async def test_an_extender_alone_reads_its_watches_in_longer_batches(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                      f"profiles:\n- schedulerName: {PROFILE}\n")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                          "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:9'}}]\n"
                          "users: [{name: u, user: {token: t}}]\n"
                          "contexts: [{name: c, context: {cluster: k, user: u}}]\n")
    coalesce = {}
    for no_scheduling in (True, False):
        service = build_service(ServiceOptions(config=str(config), kubeconfig=str(kubeconfig), extender_profile=PROFILE,
                                               no_scheduling=no_scheduling))
        try:
            coalesce[no_scheduling] = {r.watch_coalesce for r in service.source.reflectors.values()}
        finally:
            for client in service.clients:
                await client.close()
    assert coalesce == {True: {EXTENDER_WATCH_COALESCE}, False: {WATCH_COALESCE}}
    assert EXTENDER_WATCH_COALESCE > WATCH_COALESCE


def test_extender_options_are_checked():
    options = ServiceOptions(config="c.yaml", extender_profile="nope")
    with pytest.raises(InputError, match="--extender-profile: c.yaml has no profile 'nope' \\(profiles: a, b\\)"):
        check_extender_options(options, ["a", "b"])
    with pytest.raises(InputError, match="--no-scheduling serves only the extender"):
        check_extender_options(ServiceOptions(config="c.yaml", no_scheduling=True), ["a"])
    with pytest.raises(InputError, match="--extender-prefix: expected a URL path"):
        check_extender_options(ServiceOptions(config="c.yaml", extender_profile="a", extender_prefix="sched"), ["a"])
    check_extender_options(ServiceOptions(config="c.yaml", extender_profile="a", extender_prefix="/x/y"), ["a"])


def test_a_snapshot_keeps_its_ages_while_the_service_runs():
    clock = [1000.0]
    snapshot = MetricsSnapshot({"cpu_utilization": {"a": (0.5, 30.0)}}, "s")
    hub = SourceHub(snapshot=snapshot, clock=lambda: clock[0])
    source = hub.source(plugin="P", metric="cpu_utilization", address="", query="q", source_args=SourceArgs())
    assert source.data.sample_times == {"a": 970.0}
    generation = source.data.generation
    clock[0] = 5000.0
    hub.resample_snapshot()
    assert source.data.sample_times == {"a": 4970.0} and source.data.generation == generation + 1
