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
