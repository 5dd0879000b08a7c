"""Tests for scorer.inputs.reader: the one guarded reader of YAML and JSON inputs."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from scorer.errors import ConfigError, ReadError
from scorer.inputs.reader import (
    CLUSTER_LIMITS,
    CONFIG_LIMITS,
    ENV_MAX_BYTES,
    Document,
    Limits,
    parse_documents,
    read_documents,
    read_text,
    single_document,
)

LIMITS = CLUSTER_LIMITS


def parse(text: str | bytes, **kwargs: object) -> list[object]:
    limits = kwargs.pop("limits", LIMITS)
    return [d.data for d in parse_documents(text, "in.yaml", limits=limits, **kwargs)]  # type: ignore[arg-type]


def error_of(text: str | bytes, **kwargs: object) -> str:
    limits = kwargs.pop("limits", LIMITS)
    with pytest.raises(ReadError) as info:
        parse_documents(text, "in.yaml", limits=limits, **kwargs)  # type: ignore[arg-type]
    message = str(info.value)
    assert "\n" not in message
    return message


# -- documents ------------------------------------------------------------------------------


def test_documents_keep_their_number_and_source() -> None:
    documents = parse_documents("---\na: 1\n---\n---\nb: 2\n", "c.yaml", limits=LIMITS)
    assert [(d.number, d.data) for d in documents] == [(1, {"a": 1}), (2, None), (3, {"b": 2})]
    assert documents[2].origin == "document 3 of c.yaml"
    assert Document({}, 2, "c.yaml", item=4).origin == "document 2 of c.yaml, items[4]"


def test_json_is_one_document_and_json_looking_yaml_falls_back() -> None:
    assert parse('{"a": [1, 2.5, null, true]}') == [{"a": [1, 2.5, None, True]}]
    assert parse("{a: b, c: [d]}") == [{"a": "b", "c": ["d"]}]
    assert parse('{"a": 1}\n---\n{"b": 2}') == [{"a": 1}, {"b": 2}]
    assert error_of('{\n  "a": 1\n  "b": 2\n}') == "in.yaml: line 3, column 3: invalid JSON: Expecting ',' delimiter"


def test_syntax_is_forced_by_the_caller() -> None:
    assert error_of("{a: b}", syntax="json").startswith("in.yaml: line 1, column 2: invalid JSON: ")
    assert parse('{"a": 1}', syntax="yaml") == [{"a": 1}]


def test_yaml_errors_name_line_and_column() -> None:
    assert error_of("a: b: c\n") == (
        "in.yaml: line 1, column 5: invalid YAML: mapping values are not allowed in this context"
    )
    assert error_of("a: \x07\n") == (
        "in.yaml: line 1, column 4: invalid YAML: control characters are not allowed (#x0007)"
    )
    assert error_of("{1: 2, [a]: 3}") == (
        "in.yaml: line 1, column 8: invalid YAML: found a mapping key that is not a string"
    )
    assert "could not determine a constructor" in error_of("!!python/object:os.system {}")


def test_single_document() -> None:
    documents = parse_documents("---\n---\na: 1\n", "c.yaml", limits=CONFIG_LIMITS)
    assert single_document(documents, "c.yaml") == documents[1]
    assert single_document(parse_documents("", "c.yaml", limits=CONFIG_LIMITS), "c.yaml") is None
    with pytest.raises(ReadError, match="^c.yaml: expected one YAML document, found 2$"):
        single_document(parse_documents("a: 1\n---\nb: 2\n", "c.yaml", limits=CONFIG_LIMITS), "c.yaml")


def test_scalars_that_only_look_typed_stay_strings() -> None:
    assert parse("a: 2024-02-30\nb: !!bool maybe\nc: 0b_\nd: !!float ._\n") == [
        {"a": "2024-02-30", "b": "maybe", "c": "0b_", "d": "._"}
    ]


# -- strictness -----------------------------------------------------------------------------


def test_duplicate_keys_name_path_document_and_line() -> None:
    text = "a: 1\n---\nmetadata:\n  labels:\n    app: x\n    app: y\n"
    assert error_of(text) == (
        'document 2 of in.yaml: metadata.labels.app: duplicate field "app" (again at line 6)'
    )


def test_duplicate_keys_in_json() -> None:
    assert error_of('{"spec": {"a": [{"b": 1, "b": 2}]}}') == (
        'document 1 of in.yaml: spec.a[0].b: duplicate field "b"'
    )


def test_merged_keys_may_be_overridden_but_not_repeated() -> None:
    text = "base: &b {x: 1, y: 2}\nc:\n  <<: *b\n  x: 3\n"
    assert parse(text) == [{"base": {"x": 1, "y": 2}, "c": {"x": 3, "y": 2}}]
    assert error_of(text + "  x: 4\n") == 'document 1 of in.yaml: c.x: duplicate field "x" (again at line 5)'


def test_merge_source_flattened_before_it_is_built_reports_no_repeat() -> None:
    # "second" merges b before b itself is built (b sits deeper): b's own keys stay its own.
    text = "a: &a {x: 1}\nfirst:\n  deep:\n    b: &b {<<: *a, x: 2}\nsecond: {<<: *b}\n"
    assert parse(text) == [{"a": {"x": 1}, "first": {"deep": {"b": {"x": 2}}}, "second": {"x": 2}}]


def test_non_strict_reading_leaves_problems_to_the_caller() -> None:
    (document,) = parse_documents("a: 1\na: .nan\n", "c.yaml", limits=LIMITS, strict=False)
    assert document.problems == (
        ("a", 'duplicate field "a" (again at line 2)'),
        ("a", "expected a finite number, got number nan"),
    )
    # A bad value is reported once: it reads on as null.
    assert document.data == {"a": None}
    (document,) = parse_documents("a: [1, " + "2" * 4400 + "]", "c.yaml", limits=LIMITS, strict=False)
    assert document.data == {"a": [1, None]}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: {b: [1, .inf]}\n", "a.b[1]: expected a finite number, got number inf"),
        ("a: -.inf\n", "a: expected a finite number, got number -inf"),
        ("a: .NaN\n", "a: expected a finite number, got number nan"),
        ("a: 1.0e+999\n", "a: expected a finite number, got number inf"),
        ('{"a": NaN}', "a: expected a finite number, got number nan"),
        ('{"a": [-Infinity]}', "a[0]: expected a finite number, got number -inf"),
        ('{"a": {"b": 1e999}}', "a.b: expected a finite number, got number inf"),
        ("a: " + "9" * 4301, "a: integer literal of 4301 digits is too long (at most 4300 digits)"),
        ('{"a": [' + "-" + "9" * 5000 + "]}", "a[0]: integer literal of 5000 digits is too long"),
        ('["\\ud800"]', "[0]: a lone surrogate escape"),
    ],
)
def test_numbers_that_cannot_be_represented_name_their_path(text: str, message: str) -> None:
    assert error_of(text).startswith(f"document 1 of in.yaml: {message}")


def test_integers_up_to_the_digit_limit_are_read() -> None:
    assert parse("a: " + "9" * 4300) == [{"a": int("9" * 4300)}]
    assert parse('{"a": ' + "9" * 4300 + "}") == [{"a": int("9" * 4300)}]


def test_a_non_finite_key_is_reported() -> None:
    assert error_of("{.inf: 1}") == "document 1 of in.yaml: a key: expected a finite number, got number inf"


# -- text ---------------------------------------------------------------------------------------


def test_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert [d.data for d in read_documents(path, limits=LIMITS)] == [{"a": 1}]
    assert parse(b'\xef\xbb\xbf{"a": 1}') == [{"a": 1}]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"kind: Pod\n\xff\xfe", "not UTF-8 text: byte 0xff at offset 10"),
        ("kind: Pod\n".encode("utf-16"), "not UTF-8 text: byte 0xff at offset 0"),
        ("caf\xe9: 1\n".encode("latin-1"), "not UTF-8 text: byte 0xe9 at offset 3"),
        (b"a: 1\n\x00\x00", "not UTF-8 text: byte 0x00 (NUL, as in binary files) at offset 5"),
    ],
)
def test_text_that_is_not_utf8_names_the_byte(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    with pytest.raises(ReadError) as info:
        read_documents(path, limits=LIMITS)
    assert str(info.value) == f"{path}: {message}"


def test_a_device_stops_at_the_first_bad_byte() -> None:
    with pytest.raises(ReadError, match="^/dev/zero: not UTF-8 text: byte 0x00 .* at offset 0$"):
        read_text("/dev/zero", limits=LIMITS)


def read_pipe(data: bytes) -> str:
    read_end, write_end = os.pipe()

    def write() -> None:
        with os.fdopen(write_end, "wb") as stream:
            stream.write(data)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        return read_text(f"/dev/fd/{read_end}", limits=LIMITS)
    finally:
        writer.join()
        os.close(read_end)


def test_a_named_pipe_is_read_while_its_writer_writes(tmp_path: Path) -> None:
    fifo = tmp_path / "cluster.yaml"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as stream:  # blocks until the reader opens the pipe
            stream.write(b"a: 1\n")

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert read_text(fifo, limits=LIMITS) == "a: 1\n"
    finally:
        writer.join()


def test_a_named_pipe_without_a_writer_is_an_error_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "cluster.yaml"
    os.mkfifo(fifo)
    message = r"cluster.yaml: a named pipe with no writer \(none came within 3s\): nothing to read$"
    with pytest.raises(ReadError, match=message):
        read_text(fifo, limits=LIMITS)


def test_a_pipe_is_read_in_chunks_that_may_split_a_character() -> None:
    mib = 1 << 20
    assert read_pipe(b"a" * (mib - 1) + "\u00e9: 1\n".encode()).endswith("\u00e9: 1\n")
    with pytest.raises(ReadError, match=f"not UTF-8 text: byte 0xc3 at offset {mib - 1}$"):
        read_pipe(b"a" * (mib - 1) + b"\xc3\x28")
    with pytest.raises(ReadError, match="the text ends inside a character at offset 4$"):
        read_pipe(b"abc\xc3")


def test_missing_files_and_directories(tmp_path: Path) -> None:
    with pytest.raises(ReadError, match=r"nope\.yaml: no such file$"):
        read_text(tmp_path / "nope.yaml", limits=LIMITS)
    with pytest.raises(ReadError, match=r": is a directory, not a file$"):
        read_text(tmp_path, limits=LIMITS)


def test_a_lone_surrogate_in_text_given_as_str() -> None:
    assert error_of("a: '\ud800'") == "in.yaml: not UTF-8 text: a lone surrogate (U+D800) at character 4"


# -- limits -------------------------------------------------------------------------------------


def test_size_limit_is_checked_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_MAX_BYTES, raising=False)
    path = tmp_path / "big.yaml"
    path.write_text("a: 12345\n")
    with pytest.raises(ReadError) as info:
        read_text(path, limits=Limits(max_bytes=8))
    assert str(info.value) == (
        f"{path}: 9 bytes, larger than the input size limit of 8 bytes; "
        f"set {ENV_MAX_BYTES} (e.g. {ENV_MAX_BYTES}=4Gi) to raise it"
    )
    monkeypatch.setenv(ENV_MAX_BYTES, "1Ki")
    assert read_text(path, limits=Limits(max_bytes=8)) == "a: 12345\n"
    monkeypatch.setenv(ENV_MAX_BYTES, "4")
    with pytest.raises(ReadError, match="limit of 4 bytes"):
        parse_documents("a: 12345\n", "text", limits=LIMITS)


@pytest.mark.parametrize("value", ["lots", "-1", "0"])
def test_size_limit_from_the_environment_must_be_a_size(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(ENV_MAX_BYTES, value)
    with pytest.raises(ReadError, match=f"^{ENV_MAX_BYTES}: expected a positive size such as 4Gi"):
        parse_documents("a: 1", "text", limits=LIMITS)


def test_default_limits() -> None:
    assert CLUSTER_LIMITS.max_bytes == 1 << 30
    assert CONFIG_LIMITS.max_alias_nodes < CLUSTER_LIMITS.max_alias_nodes
    assert CLUSTER_LIMITS.max_depth == 200


def nested_flow(depth: int) -> str:
    return "a: " + "[" * depth + "]" * depth + "\n"


def nested_block(depth: int) -> str:
    return "".join(" " * level + "a:\n" for level in range(depth - 1)) + " " * (depth - 1) + "a: 1\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # The C composer segfaulted on these before: scanned exactly, refused with the line.
        (nested_flow(30_000), "in.yaml: line 1, column 203: nested more than 200 levels deep"),
        ("- " * 30_000 + "x\n", "in.yaml: line 1, column 401: nested more than 200 levels deep"),
        (nested_block(3_000), "in.yaml: line 201, column 201: nested more than 200 levels deep"),
        # Line breaks other than \n.
        ("a:\r" + "".join(" " * i + "a:\r" for i in range(1, 1500)), "in.yaml: line 201, column 201:"),
        ("[" * 30_000 + "]" * 30_000, "in.yaml: nested more than 200 levels deep"),
        ('{"a": ' + "[" * 201 + "]" * 201 + "}", "in.yaml: nested more than 200 levels deep"),
        # Below the cheap bound: refused while the document is built.
        (nested_flow(201), "in.yaml: line 1, column 203: nested more than 200 levels deep"),
    ],
)
def test_nesting_depth_is_limited(text: str, message: str) -> None:
    assert error_of(text).startswith(message)


def test_nesting_up_to_the_limit_is_read() -> None:
    assert parse(nested_flow(199)) != []  # the mapping is level 1
    assert parse('{"a": ' + "[" * 199 + "]" * 199 + "}") != []
    assert parse(nested_block(200)) != []
    assert parse(nested_flow(9), limits=Limits(max_bytes=1000, max_depth=10)) != []
    assert "nested more than 10" in error_of(nested_flow(10), limits=Limits(max_bytes=1000, max_depth=10))


def test_brackets_in_text_do_not_trigger_the_exact_scan_but_stay_correct() -> None:
    # Thousands of brackets inside quoted strings and plain scalars: not collections.
    text = "".join(f"- a: '{{\"k\": [1, 2]}}'\n  b: x[{i}]\n" for i in range(3000))
    assert len(parse(text)[0]) == 3000  # type: ignore[arg-type]
    # Real collections hidden behind quotes are still counted.
    assert "nested more than 200" in error_of('["]", ' * 300 + "1" + "]" * 300)


def test_kubectl_managed_fields_keys_do_not_trigger_the_exact_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    # `k:{"type":"Ready"}` is text in block context: a 5,000-node export would take minutes to scan.
    import scorer.inputs.reader as reader

    def no_scan(*args: object) -> None:
        raise AssertionError("scanned exactly")

    item = '- f:status:\n    k:{"type":"Ready"}:\n      .: {}\n      f:status: {}\n  k:{"uid":"x"}: {}\n'
    monkeypatch.setattr(reader, "_scan_depth", no_scan)
    documents = parse(item * 3000)
    assert documents[0][2999] == {"f:status": {'k:{"type":"Ready"}': {".": {}, "f:status": {}}},  # type: ignore[index]
                                  'k:{"uid":"x"}': {}}
    monkeypatch.undo()
    # A deep flow collection after them is still found.
    assert error_of(item * 3000 + "- " + nested_flow(30_000)).endswith("nested more than 200 levels deep "
                                                                      "(the nesting limit of inputs)")


def alias_bomb(levels: int) -> str:
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    previous = "a"
    for name in "bcdefghijk"[:levels]:
        text += f"{name}: &{name} [" + ",".join(["*" + previous] * 9) + "]\n"
        previous = name
    return text


def test_alias_expansion_is_limited() -> None:
    assert error_of(alias_bomb(8), limits=CONFIG_LIMITS) == (
        "document 1 of in.yaml: aliases repeat 490329036 nodes, more than the limit of 100000 "
        "(an alias repeats the whole node it names)"
    )
    assert parse(alias_bomb(2), limits=CONFIG_LIMITS) != []


def test_ordinary_anchors_work_and_cycles_are_refused() -> None:
    assert parse("a: &x {b: 1}\nc: *x\nd: [*x, *x]\n") == [{"a": {"b": 1}, "c": {"b": 1}, "d": [{"b": 1}] * 2}]
    assert error_of("a: &a [*a]\n") == (
        "document 1 of in.yaml: line 1, column 4: an alias refers to a node that contains it (a cycle)"
    )


def test_aliases_cannot_nest_past_the_depth_limit() -> None:
    text = "l0: &l0 [1]\n" + "".join(f"l{i}: &l{i} [*l{i - 1}]\n" for i in range(1, 30))
    message = error_of(text, limits=Limits(max_bytes=10_000, max_depth=20))
    assert message == (
        "document 1 of in.yaml: nested more than 20 levels deep (the nesting limit of inputs) "
        "once aliases are expanded"
    )


def test_a_json_file_needs_no_yaml_guards(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"items": [{"a": "&*<<"}] * 3}))
    assert read_documents(path, limits=LIMITS)[0].data == {"items": [{"a": "&*<<"}] * 3}


# -- the configuration reader uses it -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "as_json", "errors"),
    [
        ('{"parallelism": NaN}', True, [("parallelism", "expected a finite number, got number nan")]),
        (
            "percentageOfNodesToScore: .inf\n",
            False,
            [("percentageOfNodesToScore", "expected a finite number, got number inf")],
        ),
        (
            "parallelism: " + "1" * 4400 + "\n",
            False,
            [("parallelism", "integer literal of 4400 digits is too long (at most 4300 digits)")],
        ),
    ],
)
def test_configuration_problems_are_reported_with_paths(
    text: str, as_json: bool, errors: list[tuple[str, str]]
) -> None:
    from scorer.config.text import parse_text

    with pytest.raises(ConfigError) as info:
        parse_text(text, "sched.yaml", as_json=as_json)
    assert info.value.errors == errors


def test_configuration_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    from scorer.config.text import read_file

    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb(8))
    with pytest.raises(ConfigError) as info:
        read_file(path)
    assert info.value.errors == [
        ("", "aliases repeat 490329036 nodes, more than the limit of 100000 (an alias repeats the whole node it names)")
    ]
