"""NetworkAware: Filter and Score per pod annotation and node label, args
conversion and validation, requeue events, and scheduling end to end."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
import scorer_networkaware
from scorer_networkaware import ERR_REASON, NAME, NetworkAwareArgs, factory

from scorer import testing
from scorer.plugin import ClusterEvent, Code, NodeBatch
from scorer.testing import make_cache, make_handle, make_node, make_pod, plugin_config, run_plugin

README = Path(__file__).resolve().parents[1] / "README.md"

NODES = [
    make_node("fast", labels={"network-topology": "high-speed"}),
    make_node("standard", labels={"network-topology": "standard"}),
    make_node("bare"),
]
DEFAULT_REASON = ERR_REASON.format(
    label="network-topology", value="high-speed", annotation="my-network-preference"
)


def args_from(data: dict | None) -> NetworkAwareArgs:
    """Args as the configuration converts them (camelCase keys, validated)."""
    return testing.structure(NetworkAwareArgs, data, "args", kind="NetworkAwareArgs")


def wants(value: str, key: str = "my-network-preference"):
    return make_pod("p", annotations={key: value})


# -- Filter and Score ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "pod", "nodes", "feasible", "scores"),
    [
        pytest.param(None, make_pod("p"), NODES, ["fast", "standard", "bare"], None, id="no-annotation"),
        pytest.param(None, wants("low-latency"), NODES, ["fast", "standard", "bare"], None,
                     id="value-not-in-values"),
        pytest.param(None, make_pod("p", annotations={"other": "high-speed"}), NODES,
                     ["fast", "standard", "bare"], None, id="other-annotation-key"),
        pytest.param(None, wants("high-speed"), NODES, ["fast"], {"fast": 100}, id="required-match"),
        pytest.param(None, wants("high-speed"), NODES[1:], [], None, id="no-node-matches"),
        pytest.param(
            {"requireMatch": False}, wants("high-speed"), NODES, ["fast", "standard", "bare"],
            {"fast": 100, "standard": 0, "bare": 0}, id="preference-only",
        ),
        pytest.param(
            {"requireMatch": False, "matchScore": 80, "mismatchScore": 20}, wants("high-speed"), NODES,
            ["fast", "standard", "bare"], {"fast": 80, "standard": 20, "bare": 20}, id="custom-scores",
        ),
        pytest.param(
            {"podAnnotation": "example.com/nic", "nodeLabel": "example.com/nic-speed", "values": ["25g", "100g"]},
            wants("100g", key="example.com/nic"),
            [make_node("n25", labels={"example.com/nic-speed": "25g"}),
             make_node("n100", labels={"example.com/nic-speed": "100g"}),
             make_node("other-key", labels={"network-topology": "100g"})],
            ["n100"], {"n100": 100}, id="custom-keys-and-values",
        ),
        pytest.param(
            {"podAnnotation": "example.com/nic"}, wants("high-speed"), NODES, ["fast", "standard", "bare"], None,
            id="default-annotation-ignored-when-renamed",
        ),
    ],
)
def test_filter_and_score(args, pod, nodes, feasible, scores):
    run = run_plugin(factory(args_from(args), make_handle()), pod, nodes)
    assert run.error is None
    assert run.feasible == feasible
    if scores is None:
        assert run.score_skipped or not feasible
        assert run.scores == {}
    else:
        assert not run.score_skipped
        assert run.scores == scores


def test_rejected_nodes_are_unschedulable_with_the_label_to_add():
    run = run_plugin(factory(NetworkAwareArgs(), make_handle()), wants("high-speed"), NODES)
    assert run.filter["fast"].is_success()
    for name in ("standard", "bare"):
        status = run.filter[name]
        # Unschedulable, not Unresolvable: relabelling the node makes the pod fit.
        assert status.code == Code.UNSCHEDULABLE
        assert status.reasons == (DEFAULT_REASON,)
        assert status.plugin == NAME
    assert DEFAULT_REASON == (
        "node(s) didn't have label network-topology=high-speed requested by pod annotation my-network-preference"
    )


def test_unconstrained_pod_skips_filter_and_score():
    plugin = factory(NetworkAwareArgs(), make_handle())
    for point in (plugin.pre_filter, plugin.pre_score):
        assert point(None, make_pod("p"), None).is_skip()
        assert point(None, wants("high-speed"), None) is None
    # preference only: nothing to filter, but Score runs
    preference = factory(NetworkAwareArgs(require_match=False), make_handle())
    assert preference.pre_filter(None, wants("high-speed"), None).is_skip()
    assert preference.pre_score(None, wants("high-speed"), None) is None


def test_label_codes_follow_node_updates():
    """The cached label column is rebuilt when a node changes, kept when only pods do."""
    cache = make_cache(NODES)
    plugin = factory(NetworkAwareArgs(), make_handle())
    pod = wants("high-speed")

    def feasible():
        table = cache.table
        verdict = plugin.filter_batch(None, pod, NodeBatch(table, table.rows()))
        return [n for n, bad in zip(table.names, verdict.failed.tolist(), strict=True) if not bad]

    assert feasible() == ["fast"]
    codes = cache.table.label_column("network-topology")
    cache.add_pod(make_pod("bound", node_name="standard"))
    assert feasible() == ["fast"] and cache.table.label_column("network-topology") is codes  # pods changed only
    cache.update_node(make_node("bare", labels={"network-topology": "high-speed"}))
    assert feasible() == ["fast", "bare"] and cache.table.label_column("network-topology") is not codes


# -- args ------------------------------------------------------------------------------------------


def test_default_args():
    args = args_from(None)
    assert args == NetworkAwareArgs()
    assert testing.unstructure(args) == {
        "podAnnotation": "my-network-preference",
        "nodeLabel": "network-topology",
        "values": ["high-speed"],
        "requireMatch": True,
        "matchScore": 100,
        "mismatchScore": 0,
    }


def config_with_args(args: dict) -> dict:
    return plugin_config(NAME, args)


PATH = "profiles[0].pluginConfig[0].args"


@pytest.mark.parametrize(
    ("args", "errors"),
    [
        ({"matchScore": 150}, [("matchScore", "Invalid value: 150: must be in [0, 100]")]),
        ({"mismatchScore": -1}, [("mismatchScore", "Invalid value: -1: must be in [0, 100]")]),
        ({"matchScore": 30, "mismatchScore": 30},
         [("matchScore", "Invalid value: 30: must be greater than mismatchScore (30)")]),
        ({"values": []}, [("values", "Required value: at least one annotation value")]),
        ({"values": ["high-speed", ""]}, [("values[1]", 'Invalid value: "": must be non-empty')]),
        ({"values": ["a", "a"]}, [("values[1]", 'Duplicate value: "a"')]),
        ({"values": ["10 Gbit/s"]}, [("values[0]", 'Invalid value: "10 Gbit/s": a label value must consist of '
                                      "alphanumeric characters, '-', '_' or '.', and must start and end with an "
                                      "alphanumeric character")]),
        ({"podAnnotation": ""}, [("podAnnotation", "Required value")]),
        ({"nodeLabel": "example.com/"}, [("nodeLabel", 'Invalid value: "example.com/": name part must be non-empty')]),
        ({"requireMatch": "yes"}, [("requireMatch", 'expected a boolean, got string "yes"')]),
        ({"values": "high-speed"}, [("values", 'expected a list, got string "high-speed"')]),
        ({"match_score": 50}, [("match_score", "unknown field")]),
    ],
)
def test_invalid_args_name_the_field(args, errors):
    registry = testing.build_registry(autoload=False, modules=[scorer_networkaware])
    with pytest.raises(testing.ConfigError) as info:
        testing.load_config(config_with_args(args), registry.catalog())
    assert info.value.errors == [(f"{PATH}.{path}", message) for path, message in errors]


def readme_configs() -> list[str]:
    blocks = re.findall(r"```yaml\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    return [b for b in blocks if "KubeSchedulerConfiguration" in b]


def test_readme_configuration_is_valid():
    registry = testing.build_registry(autoload=False, modules=[scorer_networkaware])
    configs = readme_configs()
    assert configs
    for text in configs:
        config = testing.load_config_text(text, registry.catalog(), source=str(README))
        profile = testing.resolve_config(config, registry.catalog())[0]
        assert NAME in profile.points["filter"] and NAME in profile.points["score"]
        assert isinstance(profile.args[NAME], NetworkAwareArgs)


# -- requeue events --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "interested"),
    [
        (ClusterEvent("Node", "Add"), True),
        (ClusterEvent("Node", "UpdateNodeLabel"), True),
        (ClusterEvent("Node", "Update"), True),  # generic update, as a watch without diffing sends
        (ClusterEvent("UnschedulablePod", "Update"), True),  # the pod's annotation may have changed
        (ClusterEvent("Node", "UpdateNodeAllocatable"), False),
        (ClusterEvent("AssignedPod", "Add"), False),
        (ClusterEvent("AssignedPod", "Delete"), False),
    ],
)
def test_events_to_register(event, interested):
    registered = factory(NetworkAwareArgs(), make_handle()).events_to_register()
    assert any(testing.matches(r, event) for r in registered) is interested


# -- end to end ------------------------------------------------------------------------------------

CLUSTER = """
kind: List
items:
- kind: Node
  metadata: {name: fast, labels: {network-topology: high-speed}}
  status: {allocatable: {cpu: "8", memory: 16Gi, pods: "20"}}
- kind: Node
  metadata: {name: standard, labels: {network-topology: standard}}
  status: {allocatable: {cpu: "8", memory: 16Gi, pods: "20"}}
- kind: Node
  metadata: {name: bare}
  status: {allocatable: {cpu: "8", memory: 16Gi, pods: "20"}}
- kind: Pod
  metadata: {name: wants-fast, annotations: {my-network-preference: high-speed}}
  spec: {containers: [{name: c, resources: {requests: {cpu: 100m}}}]}
- kind: Pod
  metadata: {name: wants-infiniband, annotations: {my-network-preference: infiniband}}
  spec: {containers: [{name: c, resources: {requests: {cpu: 100m}}}]}
- kind: Pod
  metadata: {name: anywhere}
  spec: {containers: [{name: c, resources: {requests: {cpu: 100m}}}]}
"""


def test_simulate_places_annotated_pods_on_labelled_nodes():
    config = config_with_args({"values": ["high-speed", "infiniband"]})
    registry = testing.build_registry(autoload=False, modules=[scorer_networkaware])
    report = testing.simulate(testing.load_objects(CLUSTER), config, registry=registry)
    placements = {p.pod: p for p in report.placements}
    assert placements["default/wants-fast"].node == "fast"
    assert placements["default/wants-fast"].decided_by == "only feasible node of 3"
    assert placements["default/anywhere"].node is not None
    stuck = placements["default/wants-infiniband"]
    assert stuck.node is None
    assert stuck.message == (
        "0/3 nodes are available: 3 node(s) didn't have label network-topology=infiniband "
        "requested by pod annotation my-network-preference. preemption: 0/3 nodes are available: "
        "3 No preemption victims found for incoming pod."
    )
    # Not retried on unrelated events (another pod bound): it waits for a node event.
    assert stuck.attempts == 1


def test_simulate_preference_only_favours_labelled_node():
    config = config_with_args({"requireMatch": False})
    config["profiles"][0]["plugins"]["multiPoint"]["enabled"][0]["weight"] = 20
    registry = testing.build_registry(autoload=False, modules=[scorer_networkaware])
    report = testing.simulate(testing.load_objects(CLUSTER), config, registry=registry)
    placements = {p.pod: p for p in report.placements}
    assert placements["default/wants-fast"].node == "fast"
    assert "NetworkAware +2000" in placements["default/wants-fast"].decided_by
    # "infiniband" is not in values: that pod is neither filtered nor scored.
    assert placements["default/wants-infiniband"].node is not None
    assert "NetworkAware" not in placements["default/wants-infiniband"].decided_by


def test_relabelled_node_releases_the_waiting_pod():
    registry = testing.build_registry(autoload=False, modules=[scorer_networkaware])
    nodes = [make_node("standard", labels={"network-topology": "standard"})]
    pod = wants("high-speed")
    cluster = testing.InMemoryCluster(nodes, [pod], [])
    clock = testing.VirtualClock()
    asm = testing.assemble(config_with_args({}), cluster, registry=registry, clock=clock)
    cluster.start(asm.handlers)
    asyncio.run(testing.schedule_pending(asm.scheduler))
    assert asm.queue.pending_counts()["unschedulable"] == 1
    assert asm.queue.move_all_to_active_or_backoff(ClusterEvent("AssignedPod", "Add")) == 0

    asm.cache.update_node(make_node("standard", labels={"network-topology": "high-speed"}))
    assert asm.queue.move_all_to_active_or_backoff(ClusterEvent("Node", "UpdateNodeLabel")) == 1
    clock.advance_to(60)  # past the pod's backoff
    asyncio.run(testing.schedule_pending(asm.scheduler))
    assert cluster.pods[pod.key].node_name == "standard"
