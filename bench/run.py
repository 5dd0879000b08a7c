"""Bench: scheduling-cycle latency and throughput, default or metric-driven profile.

    python bench/run.py                      # 500, 5,000 and 15,000 nodes, default profile
    python bench/run.py --nodes 500 --pods 200 --out /tmp/b.json
    python bench/run.py --profile metrics    # + LoadAware and NetworkTraffic on a metrics snapshot

With ``--profile metrics`` (needs the contrib plugins installed) every node
has a random CPU utilization and network rate in a static snapshot, the two
plugins score and filter by them, and pods placed during the run count as
in-flight load. It also times the mapping of one bulk Prometheus result
(an instant vector with one series per node) to nodes: the per-refresh cost
that replaces per-pod queries.

Synthetic clusters as kube-scheduler's scheduler_perf builds them: nodes of
4 CPU, 32Gi memory, 110 pods, spread over 3 zones; ``--existing-per-node``
running pods on each node; then ``--pods`` pending pods (100m CPU, 500Mi, the
scheduler_perf pod template) scheduled one by one with the default profile
by ``Scheduler.schedule_one``, yielding to the event loop as ``Scheduler.run``
does (``maybe_yield``: once per 5 ms of scheduling), when the binding tasks
started meanwhile run. Per-cycle time is the synchronous scheduling cycle
(PreFilter, Filter, Score, select, assume, Reserve, Permit;
``ScheduleOneResult.seconds``); pods/s is wall time over everything: pops,
cycles, binding tasks, the in-memory bind and the event handlers confirming
each bound pod. Results are printed as a table and written as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from scorer import __version__
from scorer.assembly import assemble, gc_tuned
from scorer.cluster.memory import InMemoryCluster
from scorer.model import Node, Pod, node_from_dict, pod_from_dict
from scorer.sources import MetricsSnapshot, NodeIndex, NodeMapping
from scorer.sources.source import parse_vector

ZONES = ("zone-a", "zone-b", "zone-c")


def make_nodes(count: int, zones: tuple[str, ...] = ZONES) -> list[Node]:
    """``count`` nodes of scheduler_perf's node template, unique hostnames, zones round-robin."""
    nodes = []
    for i in range(count):
        name = f"node-{i:05d}"
        alloc = {"cpu": "4", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
        nodes.append(node_from_dict({
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                  "topology.kubernetes.io/zone": zones[i % len(zones)]}},
            "status": {"allocatable": alloc, "capacity": alloc},
        }))
    return nodes


def make_pod(name: str, node: str = "", cpu: str = "100m", memory: str = "500Mi") -> Pod:
    return pod_from_dict({
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "bench", "uid": f"uid-{name}"},
        "spec": {"nodeName": node, "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                 "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
    })


METRICS_CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [{
        "schedulerName": "default-scheduler",
        "plugins": {"multiPoint": {"enabled": [{"name": "LoadAware", "weight": 3},
                                               {"name": "NetworkTraffic", "weight": 2}]}},
        "pluginConfig": [{"name": "LoadAware", "args": {"usageThresholds": {"cpu": 90}}}],
    }],
}


def metrics_snapshot(nodes: list[Node], seed: int) -> MetricsSnapshot:
    rng = np.random.default_rng(seed)
    cpu = rng.uniform(0.05, 0.95, len(nodes))
    net = rng.uniform(1e5, 1e8, len(nodes))
    return MetricsSnapshot({
        "cpu_utilization": {n.name: (float(c), 10.0) for n, c in zip(nodes, cpu, strict=True)},
        "network_receive_bytes_per_second": {n.name: (float(b), 10.0) for n, b in zip(nodes, net, strict=True)},
    }, "bench snapshot")


def refresh_parse_ms(nodes: list[Node], repeat: int = 5) -> float:
    """Median time to map one bulk instant-vector result (one series per node) to nodes."""
    result = [{"metric": {"instance": f"{n.name}:9100", "node": n.name}, "value": [1700000000.0, str(i * 1.5)]}
              for i, n in enumerate(nodes)]
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        parse_vector(result, NodeMapping("auto"), NodeIndex(nodes), "sum")
        times.append(time.perf_counter() - t0)
    return round(float(np.median(times)) * 1000.0, 3)


def run_size(node_count: int, pod_count: int, existing_per_node: int, seed: int, profile: str = "default") -> dict:
    nodes = make_nodes(node_count)
    existing = [make_pod(f"init-{i}-{j}", nodes[i].name, cpu="200m", memory="1Gi")
                for i in range(node_count) for j in range(existing_per_node)]
    pending = [make_pod(f"pod-{k:06d}") for k in range(pod_count)]
    cluster = InMemoryCluster(nodes, existing + pending, [])
    if profile == "metrics":
        asm = assemble(METRICS_CONFIG, cluster, autoload=True, seed=seed,
                       metrics_snapshot=metrics_snapshot(nodes, seed))
    else:
        asm = assemble(None, cluster, autoload=False, seed=seed)
    cluster.start(asm.handlers)  # nodes and running pods into the cache, pending pods into the queue
    scheduler = asm.scheduler
    cycle_times: list[float] = []
    bindings: list[asyncio.Task[bool]] = []

    async def loop() -> None:
        while (turn := scheduler.schedule_one()) is not None:
            cycle_times.append(turn.seconds)
            if turn.binding is not None:
                bindings.append(turn.binding)
            await scheduler.maybe_yield()  # the binding tasks run
        await scheduler.wait_for_bindings()

    with gc_tuned():
        wall0 = time.perf_counter()
        asyncio.run(loop())
        wall = time.perf_counter() - wall0
    scheduled = sum(1 for task in bindings if task.result())
    ms = np.array(cycle_times) * 1000.0
    return {
        "nodes": node_count,
        "existing_pods": len(existing),
        "pods": pod_count,
        "scheduled": scheduled,
        "cycle_ms": {"p50": round(float(np.percentile(ms, 50)), 4), "p90": round(float(np.percentile(ms, 90)), 4),
                     "p99": round(float(np.percentile(ms, 99)), 4), "mean": round(float(ms.mean()), 4)},
        "pods_per_second": round(scheduled / wall, 1),
        "cycle_only_pods_per_second": round(len(ms) / (ms.sum() / 1000.0), 1),
        "score_plugins": [p.name for p in asm.frameworks["default-scheduler"].score_plugins],
        "filter_plugins": [p.name for p in asm.frameworks["default-scheduler"].filter_plugins],
        "nodes_used": len({asm.cache.pod_node[p.key] for p in pending if p.key in asm.cache.pod_node}),
        **({"refresh_parse_ms": refresh_parse_ms(nodes)} if profile == "metrics" else {}),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="500,5000,15000", help="comma-separated node counts")
    parser.add_argument("--pods", type=int, default=1000, help="pending pods scheduled per size")
    parser.add_argument("--existing-per-node", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", choices=("default", "metrics"), default="default")
    parser.add_argument("--out", default=None, help="JSON results (default bench/results/<profile>.json)")
    args = parser.parse_args(argv)
    args.out = args.out or f"bench/results/{args.profile}.json"
    sizes = [int(s) for s in args.nodes.split(",") if s.strip()]
    results = []
    print(f"{'nodes':>7} {'pods':>6} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'pods/s':>9} {'cycle-only/s':>13}")
    for size in sizes:
        r = run_size(size, args.pods, args.existing_per_node, args.seed, args.profile)
        results.append(r)
        c = r["cycle_ms"]
        print(f"{r['nodes']:>7} {r['scheduled']:>6} {c['p50']:>8.3f} {c['p90']:>8.3f} {c['p99']:>8.3f} "
              f"{r['pods_per_second']:>9.1f} {r['cycle_only_pods_per_second']:>13.1f}"
              + (f"   refresh parse {r['refresh_parse_ms']:.2f} ms, nodes used {r['nodes_used']}"
                 if "refresh_parse_ms" in r else ""), flush=True)
    report = {
        "scorer": __version__,
        "python": sys.version.split()[0],
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "profile": ("default-scheduler (kube defaults; plugins scorer implements)" if args.profile == "default"
                    else "default plugins + LoadAware (weight 3, cpu threshold 90%) + NetworkTraffic (weight 2), "
                         "static metrics snapshot"),
        "results": results,
    }
    write_report(args.out, report)
    return 0


def write_report(path: str, report: dict) -> None:
    """The JSON result file (its folder created), and one line saying where it is."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written {out}")


if __name__ == "__main__":
    raise SystemExit(main())
