"""``scorer explain``: one full scheduling cycle for one pod, every node evaluated.

The pod is either one of the cluster file's pods (``--pod NS/NAME``, explained
as if pending) or a manifest that is not in the cluster yet (``--pod FILE``:
"where would this go if I applied it now?"), see ``pod_from_manifest``.

The JSON shape is a stable contract (other tools and our conformance checks
read it); see ``explain_pod``.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import attrs

from scorer.assembly import assemble
from scorer.cluster.memory import InMemoryCluster
from scorer.errors import InputError, ModelError
from scorer.framework import NodeBatch, Status
from scorer.framework.cycle_state import CycleState
from scorer.framework.runtime import Framework
from scorer.model import LoadedObjects, Pod, load_file
from scorer.plugins.volumebinding import volume_decisions
from scorer.registry import PluginRegistry
from scorer.sources import MetricsSnapshot, SourceHub, snapshot_from_documents

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def is_manifest_ref(ref: str) -> bool:
    """``--pod`` names a manifest file (an existing path, or anything ending
    .yaml/.yml/.json) rather than ``ns/name`` of a pod in the cluster file."""
    return ref.lower().endswith(MANIFEST_SUFFIXES) or os.path.isfile(ref)


def pod_from_manifest(path: str) -> Pod:
    """The one Pod of a manifest file, decoded as strictly as cluster files
    (errors name the file and the field). The file holds exactly one object, a
    Pod; everything in it is kept as written (``spec.nodeName`` too, which the
    NodeName filter then enforces, as kube-scheduler's filter would)."""
    objects = load_file(path)
    found = [f"Pod {p.key}" for p in objects.pods] + [f"Node {n.name}" for n in objects.nodes]
    found += [f"Namespace {ns.name}" for ns in objects.namespaces] + list(objects.skipped)
    found += [f"{type(obj).__name__} {obj.key}" for obj in objects.storage]
    for workload in getattr(objects, "workloads", ()):  # owner objects and budgets, once decoded
        found.append(f"{getattr(workload, 'kind', type(workload).__name__)} {workload.namespace}/{workload.name}")
    if len(objects.others) > len(objects.skipped):  # MetricsSnapshot documents are not listed as skipped
        found.append("a MetricsSnapshot")
    if len(objects.pods) != 1 or len(found) != 1:
        listed = ", ".join(found[:5]) + (", ..." if len(found) > 5 else "") if found else "no object"
        raise ModelError(f"{path}: --pod FILE: expected exactly one Pod in the file, found {listed}")
    return objects.pods[0]


def find_pod(objects: LoadedObjects, ref: str) -> Pod:
    """``ns/name``, or ``name`` in the ``default`` namespace."""
    key = ref if "/" in ref else f"default/{ref}"
    for pod in objects.pods:
        if pod.key == key:
            return pod
    names = ", ".join(sorted(p.key for p in objects.pods)[:10]) or "none"
    raise InputError(f"pod {key!r} is not in the cluster file (pods: {names})")


def explain_pod(
    objects: LoadedObjects,
    config_source: Any,
    pod_ref: str | Pod,
    *,
    registry: PluginRegistry | None = None,
    autoload: bool | None = None,
    seed: int = 0,
    metrics_snapshot: MetricsSnapshot | None = None,
) -> dict[str, Any]:
    """Returns exactly::

        {"pod": "<ns>/<name>", "profile": "<schedulerName>",
         "nodes": {"<node>": {"feasible": bool, "filter": null | {"plugin", "code", "reasons"},
                              "scores": {"<Plugin>": {"raw", "normalized", "weight", "weighted"}},
                              "total": int,
                              "metrics": {"<metric>": {"plugin", "value", "ageSeconds", "state",
                                                       "inFlightPods", "policy"}}}},
         "selected": "<node>" | null, "message": "<FitError text or empty>"}

    plus, when a plugin failed the cycle (it raised, or returned what its
    extension point does not accept: an error, not an unschedulable pod),
    ``"error": {"point": "Score", "plugin": "<Plugin>", "distribution":
    "<name version>", "message": "running Score plugin ...: <ExcType>: ..."}``;
    ``message`` then says the same. Plus, for a pod with PersistentVolumeClaims that VolumeBinding placed,
    ``"volumes": {"<claim>": "bound to PersistentVolume <pv>" | "binds
    PersistentVolume <pv>" | "provisioned on <node>"}`` for the selected node
    (a claim that fails shows in the nodes' filter reasons instead).

    ``metrics`` (empty without metric-driven plugins) shows, per node, what
    each metric-driven plugin of the profile read: the value (null: none),
    its age in seconds, its state (fresh, stale, missing, warming-up), the
    pods counted as in flight on the node, and the policy applied.

    ``pod_ref`` is ``ns/name`` (or ``name`` in ``default``) of a pod of
    ``objects``, explained as if pending (its ``spec.nodeName`` is cleared);
    or a ``Pod`` that is not in the cluster (``pod_from_manifest``), explained
    exactly as written. A Pod with the namespace/name of a cluster pod replaces
    it, as applying the manifest would (``kubectl replace --force``): the
    cluster's pod no longer counts on its node.
    """
    from_manifest = isinstance(pod_ref, Pod)
    pod = pod_ref if isinstance(pod_ref, Pod) else find_pod(objects, pod_ref)
    # The pod is explained as if pending: it does not count on any node itself.
    others = [p for p in objects.pods if p.key != pod.key]
    cluster = InMemoryCluster.from_objects(attrs.evolve(objects, pods=others))
    if metrics_snapshot is None:
        metrics_snapshot = snapshot_from_documents(objects.others, "the cluster file")
    asm = assemble(config_source, cluster, registry=registry, autoload=autoload, seed=seed,
                   metrics_snapshot=metrics_snapshot)
    fwk = asm.frameworks.get(pod.scheduler_name)
    if fwk is None:
        profiles = ", ".join(sorted(asm.frameworks))
        raise InputError(
            f"pod {pod.key} has schedulerName {pod.scheduler_name!r}, which no profile of the configuration "
            f"defines (profiles: {profiles})"
        )
    cluster.start(asm.handlers)
    if asm.sources.prometheus_sources:  # after loading: series are mapped to the cache's nodes
        asyncio.run(asm.sources.refresh_all())
    if pod.node_name and not from_manifest:
        pod = attrs.evolve(pod, node_name="")
    table = asm.cache.table
    metrics = metrics_by_node(asm.sources, fwk, NodeBatch(table, table.rows()))
    # score_all: a lone feasible node is scored too (kube-scheduler, and a real cycle, skip scoring
    # then), so the explanation shows every plugin's scores; the chosen node is the same.
    state = CycleState()
    result = asm.scheduler.schedule_pod(fwk, state, pod, evaluate_all=True, score_all=True)
    statuses = result.node_statuses(table)
    feasible_names = {table.names[int(r)] for r in result.feasible_rows}
    scores_by_node: dict[str, dict[str, dict[str, int]]] = {}
    totals: dict[str, int] = {}
    if result.scores is not None:
        feasible = [table.names[int(r)] for r in result.feasible_rows]
        for i, name in enumerate(feasible):
            per_plugin = {}
            for ps in result.scores.plugins:
                raw, norm = int(ps.raw[i]), int(ps.normalized[i])
                per_plugin[ps.plugin] = {"raw": raw, "normalized": norm, "weight": ps.weight,
                                         "weighted": norm * ps.weight}
            scores_by_node[name] = per_plugin
            totals[name] = sum(v["weighted"] for v in per_plugin.values())
    nodes: dict[str, Any] = {}
    for name in table.names:
        status = statuses.get(name)
        feasible_node = name in feasible_names
        nodes[name] = {
            "feasible": feasible_node,
            "filter": status_json(status),
            "scores": scores_by_node.get(name, {}),
            "total": totals.get(name, 0),
            "metrics": metrics.get(name, {}),
        }
    message = result.message if result.selected is None else ""
    out: dict[str, Any] = {
        "pod": pod.key,
        "profile": fwk.profile_name,
        "nodes": nodes,
        "selected": result.selected,
        "message": message,
    }
    if result.failed_at:
        out["error"] = error_json(result.failed_at, result.status, asm.registry)
    volumes = volume_decisions(state, result.selected) if result.selected is not None else {}
    if volumes:
        out["volumes"] = volumes
    if result.selected is None and result.nominated:
        # What PostFilter (preemption) would do; nothing is deleted: the recorder is never flushed.
        out["preemption"] = {"nominatedNode": result.nominated, "victims": [v.key for v in result.victims]}
    return out


def error_json(point: str, status: Status, registry: PluginRegistry) -> dict[str, Any]:
    """The plugin that failed the cycle (it raised, or returned what its point does not accept),
    its distribution and the message naming the exception, as ``explain_pod`` shows it."""
    info = registry.plugins.get(status.plugin)
    return {"point": point, "plugin": status.plugin, "distribution": info.origin if info is not None else "",
            "message": status.message()}


def status_json(status: Status | None) -> dict[str, Any] | None:
    """A node's Filter status as ``explain_pod`` shows it (None: it passed)."""
    if status is None:
        return None
    return {"plugin": status.plugin, "code": status.code.label, "reasons": list(status.reasons)}


def metrics_by_node(hub: SourceHub, fwk: Framework, batch: NodeBatch) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for binding in hub.bindings:
        if fwk.plugins.get(binding.plugin) is None:
            continue
        for node, entry in binding.reader.explain(batch).items():
            out.setdefault(node, {})[binding.metric] = entry
    return out


def format_table(explanation: dict[str, Any]) -> str:
    """A readable table of an explanation."""
    lines = [f"pod {explanation['pod']}  profile {explanation['profile']}"]
    plugins: list[str] = []
    for node in explanation["nodes"].values():
        for plugin in node["scores"]:
            if plugin not in plugins:
                plugins.append(plugin)
    error = explanation.get("error")
    # A plugin that failed while scoring keeps its column: "error" in the rows of the nodes it scored.
    failed = error["plugin"] if error and error["point"] in ("PreScore", "Score") else None
    if failed and failed not in plugins:
        plugins.append(failed)
    header = ["NODE", "FEASIBLE", *plugins, "TOTAL", "FILTERED BY"]
    rows = []
    for name, node in explanation["nodes"].items():
        marker = "*" if name == explanation["selected"] else ""
        cells = [name + marker, "yes" if node["feasible"] else "no"]
        for plugin in plugins:
            s = node["scores"].get(plugin)
            if s is None and plugin == failed and node["feasible"]:
                cells.append("error")
                continue
            cells.append("" if s is None else f"{s['normalized']}x{s['weight']}={s['weighted']}")
        cells.append(str(node["total"]) if node["feasible"] and not failed else "")
        f = node["filter"]
        cells.append("" if f is None else f"{f['plugin']} ({f['code']}): {'; '.join(f['reasons'])}")
        rows.append(cells)
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    if explanation["selected"]:
        lines.append(f"selected: {explanation['selected']}  (* marks it; cells are normalized x weight)")
    elif error:  # a plugin failed: the pod is not unschedulable, it is retried
        origin, message = error["distribution"], error["message"]
        lines.append(f"error: {message}" + (f" ({origin})" if origin and origin not in message else ""))
    else:
        lines.append(f"unschedulable: {explanation['message']}")
    for claim, decision in (explanation.get("volumes") or {}).items():
        lines.append(f"claim {claim}: {decision}")
    if preemption := explanation.get("preemption"):
        lines.append(f"preemption would nominate node {preemption['nominatedNode']} and delete "
                     f"{', '.join(preemption['victims'])}")
    lines.extend(_metrics_table(explanation))
    return "\n".join(lines)


def _metrics_table(explanation: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    metric_rows = [("NODE", "METRIC", "VALUE", "AGE", "STATE", "IN-FLIGHT", "POLICY")]
    for name, node in explanation["nodes"].items():
        for metric, m in node.get("metrics", {}).items():
            value = "-" if m["value"] is None else f"{m['value']:.6g}"
            age = "-" if m["ageSeconds"] is None else f"{m['ageSeconds']:.0f}s"
            metric_rows.append((name, metric, value, age, m["state"], str(m["inFlightPods"]), m["policy"]))
    if len(metric_rows) > 1:
        lines.append("")
        lines.append("metrics read by the profile's plugins:")
        widths = [max(len(r[i]) for r in metric_rows) for i in range(len(metric_rows[0]))]
        for r in metric_rows:
            lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return lines
