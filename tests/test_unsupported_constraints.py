"""Hard constraints no plugin evaluates (PersistentVolumeClaim volumes, until the volume plugins
exist): the pod is not placed, and the rejection names the missing plugin, in the framework, the
scheduling cycle, the queue and the events. Pod (anti-)affinity and topology spreading are no longer
checked: InterPodAffinity and PodTopologySpread evaluate them, and a profile that disables them
ignores them, as kube-scheduler does."""

from __future__ import annotations

import attrs
import pytest
from schedkit import build, config_with, schedule_all

from scorer.assembly import plugin_events
from scorer.config.defaults import KUBE_PLUGINS
from scorer.framework import Code, CycleState, NodeBatch
from scorer.framework.catalog import EXTENSION_POINTS, PluginInfo, extension_points_of
from scorer.framework.events import (
    EVENT_ASSIGNED_POD_ADD,
    EVENT_NODE_ADD,
    UNSCHEDULABLE_POD,
    UPDATE_POD_OTHER,
    ClusterEvent,
)
from scorer.framework.runtime import Framework, Handle
from scorer.framework.unsupported import GUARDED_PLUGINS, REQUEUE_EVENTS, requeue_events
from scorer.queue import ACTIVE, BACKOFF, UNSCHEDULABLE, SchedulingQueue
from scorer.testing import make_cache, make_node, make_pod

NODES = [make_node("n1"), make_node("n2"), make_node("n3")]
TERM = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
ANTI = {"podAntiAffinity": {REQUIRED: [TERM]}}
AFFINITY = {"podAffinity": {REQUIRED: [TERM]}}
SPREAD = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
SOFT_SPREAD = {**SPREAD, "whenUnsatisfiable": "ScheduleAnyway"}
PVC = {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}}
EPHEMERAL = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}
NOT_IMPLEMENTED = "scorer does not implement it yet, so the pod is not placed"


def claim_pod(name="web-0"):
    return make_pod(name, labels={"app": "web"}, spec={"volumes": [PVC]})


@attrs.frozen
class Profile:
    points: dict
    weights: dict = attrs.Factory(dict)
    scheduler_name: str = "test-scheduler"
    percentage_of_nodes_to_score: int | None = None
    args: dict = attrs.Factory(dict)


class Passes:
    """Accepts every node at PreFilter and Filter; named after the plugin a test enables."""

    def __init__(self, name):
        self.name = name

    def pre_filter(self, state, pod, nodes):
        return None

    def filter_batch(self, state, pod, nodes):
        return None


def framework(*plugins, installed=()):
    """``plugins`` at every point they implement; ``installed`` names more plugins in the catalog only."""
    catalog = {p.name: PluginInfo(p.name, lambda args, handle, p=p: p, extension_points_of(p)) for p in plugins}
    for name in installed:
        plugin = Passes(name)
        catalog[name] = PluginInfo(name, lambda args, handle, p=plugin: p, extension_points_of(plugin))
    points = {point: tuple(p.name for p in plugins if point in extension_points_of(p)) for point in EXTENSION_POINTS}
    return Framework(Profile(points), catalog, Handle(make_cache(NODES), "test-scheduler"))


def pre_filter(fwk, pod):
    table = fwk.handle.cache.table
    return fwk.run_pre_filter(CycleState(), pod, NodeBatch(table, table.rows()))


# -- which pods, which plugin ------------------------------------------------------------

REJECTED = [
    # (pod spec, rejecting plugin, message)
    ({"volumes": [{"name": "cfg", "configMap": {"name": "c"}}, PVC]}, "VolumeBinding",
     "pod has a volume backed by a PersistentVolumeClaim, which needs the VolumeBinding plugin; "
     f"{NOT_IMPLEMENTED}"),
    ({"volumes": [EPHEMERAL]}, "VolumeBinding",
     "pod has a volume backed by a PersistentVolumeClaim, which needs the VolumeBinding plugin; "
     f"{NOT_IMPLEMENTED}"),
    ({"volumes": [PVC, EPHEMERAL]}, "VolumeBinding",
     "pod has 2 volumes backed by PersistentVolumeClaims, which need the VolumeBinding plugin; "
     f"{NOT_IMPLEMENTED}"),
    # Other hard constraints alongside do not change the message: only missing plugins are named.
    ({"affinity": ANTI, "topologySpreadConstraints": [SPREAD], "volumes": [PVC]}, "VolumeBinding",
     "pod has a volume backed by a PersistentVolumeClaim, which needs the VolumeBinding plugin; "
     f"{NOT_IMPLEMENTED}"),
]


@pytest.mark.parametrize(("spec", "plugin", "message"), REJECTED)
def test_a_pod_with_a_hard_constraint_no_plugin_evaluates_is_rejected_at_pre_filter(spec, plugin, message):
    allowed, status = pre_filter(framework(), make_pod("web-0", spec=spec))
    assert allowed is None
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.plugin == plugin
    assert status.reasons == (message,)


ACCEPTED = [
    {},
    {"affinity": {"podAffinity": {PREFERRED: [{"weight": 1, "podAffinityTerm": TERM}]},
                  "podAntiAffinity": {PREFERRED: [{"weight": 1, "podAffinityTerm": TERM}]},
                  "nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [
                      {"key": "kubernetes.io/hostname", "operator": "Exists"}]}]}}}},
    {"affinity": {"podAffinity": {REQUIRED: []}, "podAntiAffinity": {}}},
    {"topologySpreadConstraints": [SOFT_SPREAD]},
    # Hard constraints of plugins scorer implements: those plugins evaluate them (or, disabled, ignore them).
    {"affinity": AFFINITY},
    {"affinity": ANTI},
    {"topologySpreadConstraints": [SPREAD, {**SPREAD, "topologyKey": "host"}]},
    {"volumes": [{"name": "cfg", "configMap": {"name": "c"}}, {"name": "tmp", "emptyDir": {}},
                 {"name": "token", "projected": {"sources": []}}]},
]


@pytest.mark.parametrize("spec", ACCEPTED)
def test_other_constraints_and_volumes_are_not_rejected(spec):
    allowed, status = pre_filter(framework(), make_pod("web-0", spec=spec))
    assert allowed is None and status.is_success()


@pytest.mark.parametrize(("spec", "plugin", "message"), REJECTED)
def test_an_enabled_plugin_of_that_name_steps_aside(spec, plugin, message):
    assert pre_filter(framework(Passes(plugin)), make_pod("web-0", spec=spec))[1].is_success()


@pytest.mark.parametrize("point", ["pre_filter", "filter_batch"])
def test_enabled_at_pre_filter_or_filter_is_enough(point):
    only = type("Only", (), {"name": "VolumeBinding", point: Passes.__dict__[point]})()
    assert pre_filter(framework(only), claim_pod())[1].is_success()


def test_a_plugin_of_that_name_at_another_point_does_not_step_aside():
    class ScoreOnly:
        name = "VolumeBinding"

        def score_batch(self, state, pod, nodes):
            return [0] * len(nodes)

    status = pre_filter(framework(ScoreOnly()), claim_pod())[1]
    assert status.plugin == "VolumeBinding" and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_an_installed_plugin_that_the_profile_does_not_enable_is_named_as_such():
    status = pre_filter(framework(installed=["VolumeBinding"]), claim_pod())[1]
    assert status.reasons == ("pod has a volume backed by a PersistentVolumeClaim, which needs the VolumeBinding "
                              'plugin; it is not enabled in profile "test-scheduler", so the pod is not placed',)


def test_the_guarded_plugins_are_the_volume_plugins_scorer_lacks():
    assert GUARDED_PLUGINS == ("VolumeBinding",)
    assert set(GUARDED_PLUGINS) <= KUBE_PLUGINS
    assert framework().unsupported.missing == ("VolumeBinding",)
    assert framework(Passes("VolumeBinding")).unsupported.missing == ()


# -- the scheduling cycle, the queue, events and conditions ----------------------------------


def test_the_cycle_records_the_plugin_as_rejector_and_writes_the_fit_error():
    asm, cluster = build(None, NODES, [claim_pod(), make_pod("plain")])
    schedule_all(asm)
    assert cluster.pods["default/plain"].node_name  # other pods are placed
    assert not cluster.pods["default/web-0"].node_name
    [info] = asm.queue.pending_pods()
    assert info.unschedulable_plugins == frozenset({"VolumeBinding"})
    message = ("0/3 nodes are available: pod has a volume backed by a PersistentVolumeClaim, which needs the "
               f"VolumeBinding plugin; {NOT_IMPLEMENTED}.")
    failed = [e for e in cluster.events if e.reason == "FailedScheduling"]
    assert failed and all(e.pod == "default/web-0" and e.note == message for e in failed)
    condition = cluster.conditions["default/web-0"]
    assert (condition.status, condition.reason, condition.message) == ("False", "Unschedulable", message)


def test_an_update_of_the_pod_requeues_it_and_without_the_constraint_it_is_placed():
    pod = claim_pod()
    asm, cluster = build(None, NODES, [pod])
    schedule_all(asm)
    assert asm.queue.pending_counts()[UNSCHEDULABLE] == 1
    fixed = make_pod("web-0", labels={"app": "web"})
    cluster.apply(fixed)  # the user drops the volume (in kube: a re-created pod)
    assert asm.queue.pending_counts()[UNSCHEDULABLE] == 0
    asm.queue.flush_backoff_completed(float("inf"))
    schedule_all(asm)
    assert cluster.pods["default/web-0"].node_name


class VolumeBinding(Passes):
    """What a user may install later: a plugin of that name."""

    name = "VolumeBinding"

    def __init__(self):
        super().__init__("VolumeBinding")


def test_an_installed_plugin_of_that_name_is_in_the_default_profile_and_the_pod_is_placed():
    asm, cluster = build(None, NODES, [claim_pod()], VolumeBinding)
    schedule_all(asm)
    assert cluster.pods["default/web-0"].node_name


class Clock:
    now = 0.0

    def __call__(self):
        return self.now


def test_requeue_events_keep_the_pod_parked_until_its_own_update_or_the_timeout():
    """With ``requeue_events`` merged into the queue's plugin events, cluster events leave the
    pod parked; its own update and the 5-minute flush move it."""
    asm, _ = build(None, NODES, [])
    fwk = asm.frameworks["default-scheduler"]
    events = {**requeue_events(asm.frameworks.values()), **plugin_events(asm.frameworks)}
    assert events["VolumeBinding"] == list(REQUEUE_EVENTS)
    clock = Clock()
    queue = SchedulingQueue(fwk.less, clock=clock, plugin_events=events)

    def park(pod):
        queue.add(pod)
        info = queue.pop()
        result = asm.scheduler.schedule_pod(fwk, CycleState(), info.pod)
        assert result.unschedulable_plugins == frozenset({"VolumeBinding"})
        return queue.add_unschedulable_if_not_present(info, unschedulable_plugins=result.unschedulable_plugins)

    assert park(claim_pod()) == UNSCHEDULABLE
    assert queue.move_all_to_active_or_backoff(EVENT_NODE_ADD) == 0
    assert queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_ADD) == 0
    update = ClusterEvent(UNSCHEDULABLE_POD, UPDATE_POD_OTHER, "UnschedulablePodUpdate")
    assert queue.update(None, claim_pod(), event=update) == BACKOFF
    queue.delete(claim_pod())
    clock.now = 1000.0
    assert park(claim_pod("web-1")) == UNSCHEDULABLE
    clock.now += 301
    assert queue.flush_unschedulable_leftover() == 1 and queue.pending_counts()[ACTIVE] == 1


def test_requeue_events_leave_a_real_plugin_of_that_name_alone():
    config = config_with()
    config["profiles"].append({"schedulerName": "other",
                               "plugins": {"multiPoint": {"disabled": [{"name": "VolumeBinding"}]}}})
    asm, _ = build(config, NODES, [], VolumeBinding)
    assert asm.frameworks["default-scheduler"].unsupported.missing == ()
    assert asm.frameworks["other"].unsupported.missing == GUARDED_PLUGINS
    # VolumeBinding is a plugin of one profile (without events_to_register: woken by every event),
    # so no entry is made for it.
    assert requeue_events(asm.frameworks.values()) == {}
    assert requeue_events([asm.frameworks["other"]]) == {"VolumeBinding": list(REQUEUE_EVENTS)}
