"""NodeBatch's resource matrices: gathered once per batch, read-only, refreshed when the table changes."""

from __future__ import annotations

import numpy as np
import pytest

from scorer.framework.types import NodeBatch
from scorer.state.nodetable import NodeTable
from scorer.testing import make_node, make_pod


def _table() -> NodeTable:
    table = NodeTable()
    for name, cpu in (("a", "1"), ("b", "2"), ("c", "4")):
        table.add_node(make_node(name, cpu=cpu))
    return table


def test_matrix_is_the_batch_rows_of_the_table_and_read_only() -> None:
    table = _table()
    rows = np.array([2, 0], dtype=np.int64)
    batch = NodeBatch(table, rows)
    cpu = table.resource_index["cpu"]
    matrix = batch.resource_matrix("allocatable")
    assert matrix[:, cpu].tolist() == [4000, 1000]
    assert batch.resource_matrix("allocatable") is matrix  # gathered once
    with pytest.raises(ValueError):
        matrix[0, cpu] = 1
    with pytest.raises(ValueError, match="no resource matrix"):
        batch.resource_matrix("capacity")


def test_column_accessors_return_fresh_arrays() -> None:
    table = _table()
    batch = NodeBatch(table, table.rows())
    cpu = batch.allocatable("cpu")
    cpu += 1  # the caller's own copy: the shared matrix is untouched
    assert batch.allocatable("cpu").tolist() == [1000, 2000, 4000]


def test_matrix_follows_table_changes() -> None:
    table = _table()
    batch = NodeBatch(table, table.rows())
    cpu = table.resource_index["cpu"]
    assert batch.resource_matrix("requested")[:, cpu].tolist() == [0, 0, 0]
    assert batch.requested("cpu").tolist() == [0, 0, 0]
    table.add_pod(make_pod("p", cpu="500m"), "b")
    assert batch.resource_matrix("requested")[:, cpu].tolist() == [0, 500, 0]
    assert batch.requested("cpu").tolist() == [0, 500, 0]
    assert batch.non_zero_requested("cpu").tolist() == [0, 500, 0]
