"""NodeTable's bulk pod moves (``pod_requests``, ``add_pods_at``, ``remove_pods_at``): the same
table as ``add_pod`` / ``remove_pod`` one by one, including pods replaced under the same key, pods
not on their row, another pod of the same key, and resources the table has no column for yet."""

from __future__ import annotations

import random

import attrs
import numpy as np

from scorer.framework.runtime import scratch_table
from scorer.state.nodetable import NodeTable
from scorer.testing import make_node, make_pod


def table_with(nodes=3):
    table = NodeTable()
    for i in range(nodes):
        table.add_node(make_node(f"n{i}", cpu="16", memory="64Gi"))
    return table


def same(a: NodeTable, b: NodeTable):
    n = len(a)
    assert a.resource_names == b.resource_names
    assert np.array_equal(a.requested[:n], b.requested[:n])
    assert np.array_equal(a.non_zero_requested[:n], b.non_zero_requested[:n])
    assert [dict(p) for p in a.pods] == [dict(p) for p in b.pods]
    assert all(x is y for pa, pb in zip(a.pods, b.pods, strict=True) for x, y in zip(pa.values(), pb.values(),
                                                                                      strict=True))


def random_pods(rng, count):
    pods = []
    for i in range(count):
        requests = {"example.com/gpu": str(rng.randint(1, 2))} if rng.random() < 0.2 else None
        cpu = rng.choice([None, "100m", "1", "2"])  # no cpu: the non-zero default counts
        pods.append(make_pod(f"p{i}", cpu=cpu, memory=rng.choice([None, "1Gi"]), requests=requests,
                             priority=rng.randint(0, 5)))
    return pods


def test_bulk_moves_are_the_moves_one_by_one():
    rng = random.Random(7)
    for _ in range(20):
        bulk, single = table_with(), table_with()
        pods = random_pods(rng, 12)
        rows = [rng.randrange(3) for _ in pods]
        bulk.add_pods_at(rows, pods)
        for row, p in zip(rows, pods, strict=True):
            single.add_pod(p, single.names[row])
        same(bulk, single)
        # Replace some pods under the same key (another request), remove others; a pod of the
        # wrong row is skipped, another object of the same key removes the one on the row.
        changed = [attrs.evolve(p, containers=random_pods(rng, 1)[0].containers) for p in pods[:4]]
        bulk.add_pods_at(rows[:4], changed)
        for row, p in zip(rows[:4], changed, strict=True):
            single.add_pod(p, single.names[row])
        same(bulk, single)
        gone = [(rows[i], pods[i]) for i in range(4, 12) if rng.random() < 0.6]
        gone.append(((rows[4] + 1) % 3, pods[4]))  # not on that row
        gone.append((rows[0], pods[0]))  # ``changed[0]`` is there under this key
        bulk.remove_pods_at([r for r, _ in gone], [p for _, p in gone])
        for row, p in gone:
            single.remove_pod(p, single.names[row])
        same(bulk, single)


def test_precomputed_requests_are_used_and_new_resources_get_a_column():
    table = table_with(2)
    pods = [make_pod("a", cpu="1", requests={"example.com/fpga": "2"}), make_pod("b", memory="1Gi")]
    requests = table.pod_requests(pods)
    assert "example.com/fpga" in table.resource_names
    fpga = table.resource_index["example.com/fpga"]
    assert requests.shape == (2, len(table.resource_names) + 2)
    assert requests[0, fpga + 2] == 2 and requests[0, 2 + 3] == 1  # the pod count column
    table.add_pods_at([1, 1], pods, requests)
    assert table.requested[1, fpga] == 2 and table.requested[1, 3] == 2 and table.requested[0].sum() == 0
    table.remove_pods_at([1], pods[:1], requests[:1])
    assert table.requested[1, fpga] == 0 and table.requested[1, 3] == 1 and list(table.pods[1]) == ["default/b"]
    version = table.version
    table.remove_pods_at([], [])
    table.add_pods_at([], [])
    assert table.version == version


def test_bulk_moves_on_a_scratch_copy_leave_the_table_alone():
    table = table_with(3)
    p = make_pod("p", cpu="2")
    table.add_pod(p, "n1")
    before = table.requested.copy()
    scratch = scratch_table(table, np.array([1, 2]))
    scratch.remove_pods_at([0], [p])
    scratch.add_pods_at([1], [p])
    assert np.array_equal(table.requested, before) and "default/p" in table.pods[1]
    assert scratch.requested[0, 3] == 0 and scratch.requested[1, 3] == 1
