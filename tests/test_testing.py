"""scorer.testing: run_plugin goes through the scheduler's own algorithm; schedule_pending
drives the Scheduler."""

from __future__ import annotations

from schedkit import build

from scorer.cycle import ScheduleAlgorithm
from scorer.framework import Code, PreFilterResult, Status
from scorer.testing import make_node, make_pod, run_plugin, schedule_pending


class OnlyN2:
    name = "OnlyN2"

    def pre_filter(self, state, pod, nodes):
        return PreFilterResult(frozenset({"n2"}))

    def score(self, state, pod, node):
        return 7


class RejectingPreScore:
    name = "RejectingPreScore"

    def pre_score(self, state, pod, nodes):
        return Status(Code.UNSCHEDULABLE, ("not today",))

    def score(self, state, pod, node):
        return 1


def test_run_plugin_uses_the_scheduler_algorithm_with_every_node_evaluated(monkeypatch):
    calls = []
    schedule_pod = ScheduleAlgorithm.schedule_pod

    def spy(self, fwk, state, pod, **kwargs):
        calls.append(kwargs)
        return schedule_pod(self, fwk, state, pod, **kwargs)

    monkeypatch.setattr(ScheduleAlgorithm, "schedule_pod", spy)
    run = run_plugin(OnlyN2(), make_pod("p"), [make_node("n1"), make_node("n2"), make_node("n3")])
    assert calls == [{"evaluate_all": True, "score_all": True}]
    # Nodes a PreFilterResult leaves out are not filtered; the single feasible node is still scored.
    assert run.filter == {"n2": Status(plugin="OnlyN2")}
    assert run.feasible == ["n2"] and run.scores == {"n2": 7} and run.raw_scores == {"n2": 7}


def test_a_rejecting_pre_score_fails_the_cycle_as_in_the_scheduler():
    run = run_plugin(RejectingPreScore(), make_pod("p"), [make_node("n1"), make_node("n2")])
    assert run.feasible == ["n1", "n2"]
    assert run.pre_score == Status(Code.UNSCHEDULABLE, ("not today",), "RejectingPreScore")
    assert run.error == run.pre_score and run.scores == {}


async def test_schedule_pending_schedules_every_active_pod_and_flushes_events():
    asm, cluster = build(None, [make_node("n1", cpu="1")], [make_pod("a", cpu="1"), make_pod("b", cpu="1")])
    turns = await schedule_pending(asm.scheduler)
    assert [(t.pod.name, t.outcome) for t in turns] == [("a", "binding"), ("b", "unschedulable")]
    assert turns[0].binding.result() is True
    assert [e.reason for e in cluster.events] == ["Scheduled", "FailedScheduling"]


def test_storage_builders_and_make_cache_with_storage():
    from scorer.testing import make_cache, make_csinode, make_pv, make_pvc, make_storage_class

    pv = make_pv("pv-1", storage_class="local", claim="shop/data", node_affinity={"kubernetes.io/hostname": ["n1"]},
                 csi_driver="local.csi")
    assert pv.capacity == 10 << 30 and pv.access_modes == ("ReadWriteOnce",) and pv.phase == "Bound"
    assert pv.claim_ref is not None and (pv.claim_ref.key, pv.claim_ref.uid) == ("shop/data", "uid-shop-data")
    assert pv.node_affinity is not None
    assert pv.node_affinity.matches(make_node("n1", labels={"kubernetes.io/hostname": "n1"}))
    assert (pv.csi_driver, pv.csi_handle) == ("local.csi", "pv-1")
    assert make_pv("free").phase == "Available" and make_pv("free").claim_ref is None

    claim = make_pvc("data", namespace="shop", storage_class="local", volume_name="pv-1")
    assert claim.uid == "uid-shop-data" and claim.request == 1 << 30 and claim.fully_bound and claim.phase == "Bound"
    pending = make_pvc("other")
    assert pending.storage_class == "" and not pending.fully_bound and pending.phase == "Pending"

    storage_class = make_storage_class("local", binding_mode="WaitForFirstConsumer", allowed_topologies={"zone": ["a"]})
    assert storage_class.provisioner == "kubernetes.io/no-provisioner"
    assert storage_class.allowed_topologies[0].matches({"zone": "a"})
    assert make_storage_class("x").volume_binding_mode == "Immediate"

    csinode = make_csinode("n1", drivers={"local.csi": 2, "other": None}, migrated_plugins=["kubernetes.io/gce-pd"])
    assert csinode.limits() == {"local.csi": 2} and csinode.migrated_plugins == {"kubernetes.io/gce-pd"}

    cache = make_cache([make_node("n1")], storage=[storage_class, pv, claim, csinode])
    assert cache.volumes.pv("pv-1") == pv and cache.volumes.pvc("shop/data") == claim
    assert cache.volumes.classes["local"] == storage_class and cache.volumes.csi_nodes["n1"] == csinode


def test_make_pod_takes_volumes():
    pod = make_pod("p", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                                 {"name": "tmp", "emptyDir": {}}])
    assert pod.pvc_claims == ("data",) and [v.source for v in pod.volumes] == ["persistentVolumeClaim", "emptyDir"]
