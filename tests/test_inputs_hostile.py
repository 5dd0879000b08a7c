"""Hostile input for every reader: whatever the bytes, only scorer's input errors
come out, each a line of text (property-based, with hypothesis).

The readers: the YAML/JSON reader itself, cluster files (``scorer.model``),
configurations (``scorer.config``) and metrics snapshots (``scorer.sources``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scorer.config.text import parse_text, read_file
from scorer.errors import ConfigError, InputError, ModelError, ReadError
from scorer.inputs.reader import CLUSTER_LIMITS, parse_documents
from scorer.model import load_file, load_objects
from scorer.sources.static import load_snapshot, snapshot_from_documents

TOKENS = [
    "[", "]", "{", "}", ":", ": ", "- ", "-", ",", "? ", "\n", "\r", "  ", "\t", "#", "'", '"', "\\",
    "&a ", "*a", "&b ", "*b", "<<: ", "!!map ", "!!int ", "!!binary ", "!!timestamp ", "!!python/tuple ",
    "---\n", "...\n", "|\n", ">\n", "%YAML 1.1\n", "a", "kind", "Pod", "Node", "MetricsSnapshot",
    "metadata", "name", "metrics", "value", "age", "1", "0", "-1", "1e999", ".inf", ".nan", "NaN",
    "Infinity", "9" * 50, "9" * 4400, "2024-02-30", "0b_", "true", "null", "~", "\x00", "\x07",
    "\x1b[31m", "\u2028", "\x85", "\ufeff", "é", "\ud83d", "\\ud800", "items", "List", "apiVersion",
]

yaml_like = st.lists(st.sampled_from(TOKENS), max_size=60).map("".join)
deep = st.tuples(st.sampled_from(["[", "{a: ", "- ", "a:\n ", '{"a": ']), st.integers(0, 40_000)).map(
    lambda pair: pair[0] * pair[1]
)
numbers = st.one_of(
    st.integers(0, 10_000).map(lambda n: "a: " + "7" * n),
    st.integers(0, 10_000).map(lambda n: '{"a": ' + "7" * max(n, 1) + "}"),
    st.integers(-5000, 5000).map(lambda e: f"a: 1.5e{e:+d}"),
    st.integers(-5000, 5000).map(lambda e: f'{{"a": 1e{e}}}'),
)
texts = st.one_of(yaml_like, deep, numbers)

HOSTILE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def one_line(error: Exception) -> None:
    text = str(error)
    assert text and "\n" not in text and "\r" not in text


def only(errors: tuple[type[Exception], ...], call: Callable[[], object]) -> None:
    try:
        call()
    except errors as error:
        if isinstance(error, ConfigError):
            for path, message in error.errors:
                assert "\n" not in path and "\n" not in message, error.errors
        else:
            one_line(error)


@HOSTILE
@given(st.one_of(texts, st.binary(max_size=200)))
def test_the_reader_raises_only_read_errors(text: str | bytes) -> None:
    only((ReadError,), lambda: parse_documents(text, "in.yaml", limits=CLUSTER_LIMITS))


@HOSTILE
@given(texts)
def test_cluster_text_raises_only_model_errors(text: str) -> None:
    only((ModelError,), lambda: load_objects(text, "cluster.yaml"))


@HOSTILE
@given(texts)
def test_configuration_text_raises_only_config_errors(text: str) -> None:
    only((ConfigError,), lambda: parse_text(text, "sched.yaml"))
    only((ConfigError,), lambda: parse_text(text, "sched.json", as_json=True))


snapshot_values = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20),
    st.integers(300, 500).map(lambda n: 10**n), st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["value", "age", "when"]), st.one_of(st.floats(), st.text(max_size=8)), max_size=3),
)
snapshot_documents = st.fixed_dictionaries(
    {"kind": st.just("MetricsSnapshot")},
    optional={
        "apiVersion": st.sampled_from(["scorer.dev/v1alpha1", "v1", "", 3]),
        "metrics": st.one_of(
            st.dictionaries(
                st.one_of(st.text(max_size=5), st.integers()),
                st.one_of(st.none(), st.dictionaries(st.one_of(st.text(max_size=5), st.integers()), snapshot_values)),
                max_size=3,
            ),
            snapshot_values,
        ),
    },
)


@HOSTILE
@given(snapshot_documents)
def test_snapshot_documents_raise_only_input_errors(document: dict[str, object]) -> None:
    only((InputError,), lambda: snapshot_from_documents([document], "snap.yaml"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.one_of(texts.map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary(max_size=200)))
def test_files_raise_only_input_errors(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "input.yaml"
    path.write_bytes(content)
    only((ModelError,), lambda: load_file(path))
    only((ConfigError,), lambda: read_file(path))
    only((InputError,), lambda: load_snapshot(str(path)))


@pytest.mark.parametrize("depth", [1_000, 30_000, 200_000])
@pytest.mark.parametrize("opener", ["[", "{a: ", "- ", '{"a": ', "? "])
def test_deep_nesting_is_an_error_not_a_crash(opener: str, depth: int) -> None:
    with pytest.raises(ReadError, match="nested more than 200 levels deep"):
        parse_documents(opener * depth, "deep.yaml", limits=CLUSTER_LIMITS)
