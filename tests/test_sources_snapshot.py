"""Tests for scorer.sources.static: metrics snapshots read strictly (issue 7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scorer.errors import InputError, ReadError
from scorer.model import load_objects
from scorer.sources.static import API_VERSION, load_snapshot, parse_snapshot, snapshot_from_documents

EXPECTED_VALUE = "expected a finite number of at least 0 (or null for no data)"


def snapshot(metrics: object, **fields: object) -> dict[str, object]:
    return {"kind": "MetricsSnapshot", **fields, "metrics": metrics}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (snapshot({"cpu": {"n1": -0.5}}), "metrics.cpu.n1: expected a finite number of at least 0"),
        (snapshot({"cpu": {"n1": "-3"}}), "metrics.cpu.n1: expected a finite number of at least 0"),
        (snapshot({"cpu": {"n1": float("nan")}}), "metrics.cpu.n1: expected a finite number"),
        (snapshot({"cpu": {"n1": {"value": float("inf")}}}), "metrics.cpu.n1: expected a finite"),
        (snapshot({"cpu": {"n1": 10**400}}), "metrics.cpu.n1: expected a finite number of at least 0"),
        (snapshot({"cpu": {"n1": [1]}}), f"metrics.cpu.n1: {EXPECTED_VALUE}, got list"),
        (snapshot({"cpu": {"n1": True}}), f"metrics.cpu.n1: {EXPECTED_VALUE}, got boolean true"),
        (snapshot({"cpu": {1: 0.5}}), "metrics.cpu: node names must be non-empty strings, got integer 1"),
        (snapshot({5: {"n1": 0.5}}), "metrics: metric names must be non-empty strings, got integer 5"),
        (snapshot({"cpu": {"n1": {"value": 1, "age": 10**400}}}), "metrics.cpu.n1.age: expected a finite number"),
        (snapshot({"cpu": {"n1": {"value": 1, "age": -5}}}), "metrics.cpu.n1.age: must not be negative"),
        (snapshot({}, apiVersion="v2"), 'apiVersion: expected "scorer.dev/v1alpha1" (or none), got string "v2"'),
        (snapshot({}, apiVersion=1), 'apiVersion: expected "scorer.dev/v1alpha1" (or none), got integer 1'),
    ],
)
def test_invalid_values_are_errors_with_their_path(document: dict[str, object], message: str) -> None:
    with pytest.raises(InputError) as info:
        parse_snapshot(document, "MetricsSnapshot (document 1 of m.yaml)")
    assert str(info.value).startswith(f"MetricsSnapshot (document 1 of m.yaml): {message}")


def test_the_documented_api_version_or_none_is_accepted() -> None:
    for fields in ({}, {"apiVersion": API_VERSION}):
        assert parse_snapshot(snapshot({"cpu": {"n1": 0.0}}, **fields), "s").metrics == {"cpu": {"n1": (0.0, 0.0)}}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b"kind: MetricsSnapshot\nmetrics:\n  cpu: {n1: 1}\n  cpu: {n2: 2}\n",
            'metrics.cpu: duplicate field "cpu" (again at line 4)',
        ),
        (
            b'{"kind": "MetricsSnapshot", "metrics": {"cpu": {"n1": 1, "n1": 2}}}',
            'metrics.cpu.n1: duplicate field "n1"',
        ),
        (
            b'{"kind": "MetricsSnapshot", "metrics": {"cpu": {"n1": Infinity}}}',
            "metrics.cpu.n1: expected a finite number, got number inf",
        ),
        (
            b"kind: MetricsSnapshot\nmetrics: {cpu: {n1: " + b"9" * 400 + b"}}\n",
            "expected a finite number of at least 0",
        ),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "not UTF-8 text: byte 0x89 at offset 0"),
        ("kind: MetricsSnapshot\n".encode("utf-16"), "not UTF-8 text: byte 0xff at offset 0"),
        (b"metrics: " + b"[" * 50_000, "nested more than 200 levels deep"),
        (
            b"kind: MetricsSnapshot\nmetrics: {cpu: {n1: " + b"9" * 5000 + b"}}\n",
            "integer literal of 5000 digits is too long",
        ),
    ],
)
def test_snapshot_files_go_through_the_guarded_reader(tmp_path: Path, content: bytes, message: str) -> None:
    # Before: UnicodeDecodeError, OverflowError, RecursionError or silently the last value.
    path = tmp_path / "m.yaml"
    path.write_bytes(content)
    with pytest.raises(InputError) as info:
        load_snapshot(str(path))
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_a_missing_file_is_a_read_error(tmp_path: Path) -> None:
    with pytest.raises(ReadError, match=r"nope\.yaml: no such file$"):
        load_snapshot(str(tmp_path / "nope.yaml"))


def test_an_invalid_snapshot_in_a_cluster_file_names_the_file_and_its_document() -> None:
    text = "\n---\n".join(
        json.dumps(obj)
        for obj in (
            {"kind": "Node", "metadata": {"name": "n1"}},
            {"kind": "ConfigMap", "metadata": {"name": "x"}},
            {"kind": "MetricsSnapshot", "metrics": {"cpu": {"n1": "lots"}}},
        )
    )
    objects = load_objects(text, "cluster.yaml")
    with pytest.raises(InputError) as info:
        snapshot_from_documents(objects.others, "the cluster file")
    assert str(info.value) == (
        f'MetricsSnapshot (document 3 of cluster.yaml): metrics.cpu.n1: {EXPECTED_VALUE}, got string "lots"'
    )


def test_snapshot_documents_given_as_mappings_are_numbered_in_order() -> None:
    with pytest.raises(InputError, match=r"^MetricsSnapshot \(document 2 of x\): metrics: expected a map"):
        snapshot_from_documents([{"kind": "Pod"}, {"kind": "MetricsSnapshot", "metrics": []}], "x")


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12),
        st.integers(300, 400).map(lambda n: -(10**n)), st.lists(st.floats(), max_size=2),
        st.dictionaries(st.sampled_from(["value", "age"]), st.one_of(st.floats(), st.integers(), st.text(max_size=6))),
    )
)
def test_any_value_is_read_or_refused_with_an_input_error(value: object) -> None:
    try:
        result = parse_snapshot(snapshot({"cpu": {"n1": value}}), "s")
    except InputError as error:
        assert "\n" not in str(error) and str(error).startswith("s: metrics.cpu.n1")
        return
    if result.metrics["cpu"]:
        number, age = result.metrics["cpu"]["n1"]
        assert number >= 0 and age >= 0
