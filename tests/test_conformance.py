"""The conformance suite: kube-scheduler's own plugin unit tests, as declarative cases, run through
``scorer explain`` (both ``--pod`` forms). Cases are in tests/conformance/*.yaml; the format and what
could not be translated are in tests/conformance/README.md.

Each case runs twice through the real CLI (``scorer.cli.main``, in process, ``--output json``):
with the incoming pod inside the cluster file (``--pod NS/NAME``) and as its own manifest
(``--pod FILE``). Both must give exactly the case's expectations: per node, pass or fail of the
filter (and the failure reasons when the kube test states them), and the plugin's normalized score.
``test_agreement`` runs last and prints the agreement figure (cases agreeing / total); the bar is 100%.
"""

from __future__ import annotations

import copy
import io
import json
import os
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import yaml

from scorer.cli import main
from scorer.registry import build_registry

CASES_DIR = Path(__file__).parent / "conformance"
FILTER_POINTS = ("preFilter", "filter")
SCORE_POINTS = ("preScore", "score")
CASE_KEYS = {"name", "source", "filter", "score", "post_filter", "args", "namespaces", "nodes", "pods", "pod",
             "objects", "scored_nodes", "expect", "note", "forms"}
FORMS = ("name", "file")  # --pod NS/NAME, --pod FILE
RESULTS: dict[str, bool] = {}


def load_cases() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(CASES_DIR.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        for case in data["cases"]:
            unknown = set(case) - CASE_KEYS
            assert not unknown, f"{path.name}: {case.get('name')}: unknown keys {sorted(unknown)}"
            yield f"{path.stem}: {case['name']}", case


CASES = list(load_cases())
_POINTS = {name: info.extension_points for name, info in build_registry(autoload=False).plugins.items()}


def _points(plugin: str, wanted: tuple[str, ...]) -> list[str]:
    """The points of ``wanted`` that ``plugin`` implements; a plugin this build lacks is enabled at all
    of them (the configuration then names it as unknown, and the case fails, as it should)."""
    known = _POINTS.get(plugin)
    return [p for p in wanted if known is None or p in known]


def _object(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    out = {"apiVersion": "v1", "kind": kind, **copy.deepcopy(obj)}
    out.setdefault("metadata", {})
    return out


def config_for(case: dict[str, Any], filters: list[str]) -> dict[str, Any]:
    """Only the case's plugins, each at the points the kube test exercises (plus queue sort and bind)."""
    points: dict[str, list[str]] = {}
    for plugin in filters:
        for point in _points(plugin, FILTER_POINTS):
            points.setdefault(point, []).append(plugin)
    for plugin in case.get("score") or []:
        for point in _points(plugin, SCORE_POINTS):
            points.setdefault(point, []).append(plugin)
    for plugin in case.get("post_filter") or []:
        points.setdefault("postFilter", []).append(plugin)
    plugins: dict[str, Any] = {"multiPoint": {"disabled": [{"name": "*"}]},
                               "queueSort": {"enabled": [{"name": "PrioritySort"}]},
                               "bind": {"enabled": [{"name": "DefaultBinder"}]}}
    for point, names in points.items():
        plugins[point] = {"enabled": [{"name": n} for n in names]}
    profile: dict[str, Any] = {"schedulerName": "default-scheduler", "plugins": plugins}
    if case.get("args"):
        profile["pluginConfig"] = [{"name": n, "args": a} for n, a in case["args"].items()]
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [profile]}


def write_inputs(case: dict[str, Any], tmp: Path) -> tuple[str, str, str, str, str]:
    """(config, cluster with the pod, cluster without it, pod manifest, NS/NAME)."""
    filters = list(case.get("filter") or [])
    nodes = [_object("Node", n) for n in case.get("nodes") or []]
    scored = case.get("scored_nodes")
    if scored is not None:
        # kube's score tests pass the filtered nodes explicitly: the others fail NodeUnschedulable here.
        for node in nodes:
            if node["metadata"]["name"] not in scored:
                node.setdefault("spec", {})["unschedulable"] = True
        filters.append("NodeUnschedulable")
    namespaces = [_object("Namespace", n) for n in case.get("namespaces") or []]
    pods = [_object("Pod", p) for p in case.get("pods") or []]
    pods += [copy.deepcopy(o) for o in case.get("objects") or []]  # other objects (PodDisruptionBudgets), in full
    pod = _object("Pod", case["pod"])
    ref = f"{pod['metadata'].get('namespace') or 'default'}/{pod['metadata']['name']}"
    config = tmp / "config.yaml"
    config.write_text(yaml.safe_dump(config_for(case, filters)))
    with_pod, without_pod, manifest = tmp / "with-pod.yaml", tmp / "cluster.yaml", tmp / "pod.yaml"
    with_pod.write_text(yaml.safe_dump_all([*namespaces, *nodes, *pods, pod]))
    without_pod.write_text(yaml.safe_dump_all([*namespaces, *nodes, *pods]))
    manifest.write_text(yaml.safe_dump(pod))
    return str(config), str(with_pod), str(without_pod), str(manifest), ref


def run_explain(config: str, cluster: str, pod: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["explain", "--no-plugin-autoload", "--config", config, "--cluster", cluster,
                     "--pod", pod, "--output", "json"])
    return code, out.getvalue(), err.getvalue()


def explain(config: str, cluster: str, pod: str) -> dict[str, Any]:
    code, out, err = run_explain(config, cluster, pod)
    assert code == 0, f"scorer explain exited {code}: {err.strip()}"
    return json.loads(out)


def expected_error(case: dict[str, Any]) -> list[str] | None:
    """What the error must say when the kube test expects the plugin to refuse its args (``error``, the Go
    test's message, kept as a record; ``error_now``, the substrings of the later release's error that scorer
    follows, or null where that release accepts the args). None: the case expects no error."""
    expect = case["expect"]
    if "error" not in expect:
        return None
    want = expect["error_now"] if "error_now" in expect else expect["error"]
    if want is None:
        return None
    return [want] if isinstance(want, str) else list(want)


def error_differences(case: dict[str, Any], code: int, err: str) -> list[str]:
    wanted = expected_error(case)
    assert wanted is not None
    if code == 0:
        return [f"expected scorer explain to refuse the configuration ({wanted}), it exited 0"]
    return [f"error {err.strip()!r} does not contain {w!r}" for w in wanted if w not in err]


def differences(case: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """What ``got`` (an explain JSON) says that the case's expectations do not."""
    expect = case["expect"]
    problems: list[str] = []
    nodes = got["nodes"]
    if "message" in expect:
        # a plugin's Error status (e.g. PreScore's) ends the cycle: nothing is selected, and the Go test checks
        # only that the status message contains this (strings.Contains)
        if got.get("selected") is not None:
            problems.append(f"expected the cycle to fail ({expect['message']!r}), it selected {got['selected']}")
        if expect["message"] not in (got.get("message") or ""):
            problems.append(f"message {got.get('message')!r} does not contain {expect['message']!r}")
    for node, want in (expect.get("filter") or {}).items():
        actual = nodes.get(node)
        if actual is None:
            problems.append(f"{node}: not in the output")
            continue
        failed = actual["filter"]
        if want == "pass":
            if failed is not None:
                problems.append(f"{node}: expected to pass the filter, got {failed}")
            continue
        if failed is None:
            problems.append(f"{node}: expected to fail the filter ({want}), but it passed")
            continue
        # reasons_now: the wording of a later kube release that scorer follows (the case says which)
        reasons = want.get("reasons_now", want.get("reasons"))
        if reasons is not None and sorted(failed["reasons"]) != sorted(reasons):
            problems.append(f"{node}: reasons {failed['reasons']}, expected {reasons}")
        # message: the Go test checks only that the status message contains this (strings.Contains)
        if "message" in want and not any(want["message"] in r for r in failed["reasons"]):
            problems.append(f"{node}: no reason contains {want['message']!r}: {failed['reasons']}")
        # code_now: the status code of a later kube release that scorer follows (the case says which)
        code = want.get("code_now", want.get("code"))
        if code is not None and failed["code"] != code:
            problems.append(f"{node}: code {failed['code']}, expected {code}")
        if "plugin" in want and failed["plugin"] != want["plugin"]:
            problems.append(f"{node}: rejected by {failed['plugin']}, expected {want['plugin']}")
    if "preemption" in expect:
        problems.extend(preemption_differences(expect["preemption"], got.get("preemption")))
    # scores_now: the scores of a later kube release that scorer follows, computed by hand in the case
    # from the reference formula (the case keeps 1.20's ``scores`` and says which release changed what).
    scores = {plugin: dict(per_node) for plugin, per_node in (expect.get("scores") or {}).items()}
    for plugin, per_node in (expect.get("scores_now") or {}).items():
        scores.setdefault(plugin, {}).update(per_node)
    for plugin, per_node in scores.items():
        for node, want in per_node.items():
            got_node = nodes.get(node, {})
            actual = got_node.get("scores", {}).get(plugin)
            skipped = all(plugin not in n["scores"] for n in nodes.values())
            if actual is None and skipped and got_node.get("feasible") and want == 0:
                # PreScore skipped the plugin for this pod (kube >=1.27's Skip status, which scorer
                # follows): it scores no node, which adds 0 to every node, as the expected score says.
                continue
            if actual is None:
                problems.append(f"{node}: no {plugin} score (filter: {nodes.get(node, {}).get('filter')})")
            elif actual["normalized"] != want:
                problems.append(f"{node}: {plugin} normalized {actual['normalized']}, expected {want}")
    return problems


def preemption_differences(want: dict[str, Any] | None, got: dict[str, Any] | None) -> list[str]:
    """PostFilter's outcome: ``want`` null means no nomination (explain has no ``preemption`` key); else
    ``nominatedNode`` (a node, or the list of nodes the Go test accepts) and, when the Go test checks them,
    ``victims`` (pod names, as a set)."""
    if want is None:
        return [] if got is None else [f"expected no preemption, got {got}"]
    if got is None:
        return [f"expected preemption {want}, got none"]
    problems = []
    nodes = want["nominatedNode"] if isinstance(want["nominatedNode"], list) else [want["nominatedNode"]]
    if got["nominatedNode"] not in nodes:
        problems.append(f"nominated {got['nominatedNode']}, expected {' or '.join(nodes)}")
    if "victims" in want:
        victims = sorted(v.split("/")[-1] for v in got["victims"])
        if victims != sorted(want["victims"]):
            problems.append(f"victims {victims}, expected {sorted(want['victims'])}")
    return problems


@pytest.fixture(autouse=True)
def _no_autoload(monkeypatch):
    monkeypatch.setenv("SCORER_DISABLE_PLUGIN_AUTOLOAD", "1")


@pytest.mark.parametrize(("case_id", "case"), CASES, ids=[c[0] for c in CASES])
def test_case(case_id: str, case: dict[str, Any], tmp_path: Path) -> None:
    RESULTS[case_id] = False
    config, with_pod, without_pod, manifest, ref = write_inputs(case, tmp_path)
    problems = []
    forms = case.get("forms") or FORMS
    assert set(forms) <= set(FORMS), forms
    runs = {"name": ("--pod NS/NAME", with_pod, ref), "file": ("--pod FILE", without_pod, manifest)}
    for form, cluster, pod in (runs[f] for f in forms):
        if expected_error(case) is not None:
            code, _, err = run_explain(config, cluster, pod)
            problems.extend(f"{form}: {p}" for p in error_differences(case, code, err))
            continue
        try:
            got = explain(config, cluster, pod)
        except AssertionError as error:
            problems.append(f"{form}: {error}")
            continue
        problems.extend(f"{form}: {p}" for p in differences(case, got))
    assert not problems, f"{case['source']}\n" + "\n".join(problems)
    RESULTS[case_id] = True


def test_agreement(capsys: pytest.CaptureFixture[str]) -> None:
    """Runs after the cases (file order): the agreement figure, printed in the summary."""
    if not RESULTS:
        pytest.skip("no conformance case ran in this session (deselected)")
    agreed = sum(RESULTS.values())
    by_file: dict[str, list[bool]] = {}
    for case_id, ok in RESULTS.items():
        by_file.setdefault(case_id.split(":")[0], []).append(ok)
    lines = [f"conformance: {agreed}/{len(RESULTS)} cases agree ({100 * agreed / len(RESULTS):.1f}%)"]
    lines += [f"  {name}: {sum(oks)}/{len(oks)}" for name, oks in sorted(by_file.items())]
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    if os.environ.get("SCORER_CONFORMANCE_REPORT"):
        Path(os.environ["SCORER_CONFORMANCE_REPORT"]).write_text("\n".join(lines) + "\n")
    assert agreed == len(RESULTS), lines[0]
