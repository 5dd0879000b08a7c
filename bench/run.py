"""First bench: scheduling-cycle latency and throughput of the default profile.

    python bench/run.py                      # 500, 5,000 and 15,000 nodes
    python bench/run.py --nodes 500 --pods 200 --out /tmp/b.json

Synthetic clusters as kube-scheduler's scheduler_perf builds them: nodes of
4 CPU, 32Gi memory, 110 pods, spread over 3 zones; ``--existing-per-node``
running pods on each node; then ``--pods`` pending pods (100m CPU, 500Mi, the
scheduler_perf pod template) scheduled one by one with the default profile.
Per-cycle time is the synchronous scheduling cycle (pop, filter, score,
select, assume, reserve, permit); pods/s also counts the in-memory bind.
Results are printed as a table and written as JSON.
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
from scorer.memory import InMemoryCluster
from scorer.model import Node, Pod, node_from_dict, pod_from_dict

ZONES = ("zone-a", "zone-b", "zone-c")


def make_nodes(count: int) -> list[Node]:
    nodes = []
    for i in range(count):
        name = f"node-{i:05d}"
        alloc = {"cpu": "4", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
        nodes.append(node_from_dict({
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                  "topology.kubernetes.io/zone": ZONES[i % len(ZONES)]}},
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


def run_size(node_count: int, pod_count: int, existing_per_node: int, seed: int) -> dict:
    nodes = make_nodes(node_count)
    existing = [make_pod(f"init-{i}-{j}", nodes[i].name, cpu="200m", memory="1Gi")
                for i in range(node_count) for j in range(existing_per_node)]
    pending = [make_pod(f"pod-{k:06d}") for k in range(pod_count)]
    cluster = InMemoryCluster(nodes, existing + pending, [])
    asm = assemble(None, cluster, autoload=False, seed=seed)
    asm.cache.load(nodes, existing, [])
    for pod in pending:
        asm.queue.add(pod)
    scheduler, queue = asm.scheduler, asm.queue
    cycle_times: list[float] = []
    scheduled = 0

    async def loop() -> None:
        nonlocal scheduled
        while True:
            qpi = queue.pop()
            if qpi is None:
                break
            t0 = time.perf_counter()
            attempt = scheduler.scheduling_cycle(qpi)
            cycle_times.append(time.perf_counter() - t0)
            if attempt is not None and await scheduler.binding_cycle(attempt):
                scheduled += 1

    with gc_tuned():
        wall0 = time.perf_counter()
        asyncio.run(loop())
        wall = time.perf_counter() - wall0
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
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="500,5000,15000", help="comma-separated node counts")
    parser.add_argument("--pods", type=int, default=1000, help="pending pods scheduled per size")
    parser.add_argument("--existing-per-node", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="bench/results/first-bench.json")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.nodes.split(",") if s.strip()]
    results = []
    print(f"{'nodes':>7} {'pods':>6} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'pods/s':>9} {'cycle-only/s':>13}")
    for size in sizes:
        r = run_size(size, args.pods, args.existing_per_node, args.seed)
        results.append(r)
        c = r["cycle_ms"]
        print(f"{r['nodes']:>7} {r['scheduled']:>6} {c['p50']:>8.3f} {c['p90']:>8.3f} {c['p99']:>8.3f} "
              f"{r['pods_per_second']:>9.1f} {r['cycle_only_pods_per_second']:>13.1f}", flush=True)
    report = {
        "scorer": __version__,
        "python": sys.version.split()[0],
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "profile": "default-scheduler (kube defaults; plugins scorer implements)",
        "results": results,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
