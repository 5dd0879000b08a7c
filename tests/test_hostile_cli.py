"""Hostile input against the ``scorer`` command, as a new user trying to break it.

An independent suite: every case is a file (or path, or argument) given to ``scorer simulate``,
``scorer explain``, ``scorer config validate`` or ``--metrics``, and every case must end with

* an exit status among the expected ones: 2 for invalid input, 0 for valid (if tricky) input;
* no traceback, no "Exception ignored", no numpy warning, nothing but ``error:``, ``warning:`` and
  ``note:`` lines on stderr, each of bounded length, and no raw escape character anywhere;
* for status 2: an ``error:`` line naming the file (or the field, or the value) and no output;
* for status 0: the right placements, and the warning the case asks for (objects scorer skips,
  values that match nothing);
* bounded time (and, for the inputs that can crash or exhaust the process, bounded memory).

Most cases run in-process (``scorer.cli.main`` with captured output, under a timer). The inputs
that could crash the interpreter (deep nesting in the C parser, alias bombs, /dev/zero, huge and
special files) run in a subprocess with a timeout and an address-space limit, so a segfault, a
memory blow-up or a hang fails the case instead of taking pytest down; those are marked ``slow``.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import resource
import signal
import subprocess
import sys
import traceback
import warnings
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scorer.cli import main

IN_PROCESS_TIMEOUT = 20.0  # seconds; any case is a fraction of a second when it works
SUBPROCESS_TIMEOUT = 10.0
MEMORY_LIMIT = 1536 * 2**20  # address space of a subprocess case
MAX_LINE = 2000  # an error line may quote a value, not a megabyte of it
OUTPUT_READ_LIMIT = 1 << 20  # at most this much of a subprocess's output is read back
STDERR_PREFIXES = ("error: ", "warning: ", "note: ")

# --- building inputs ----------------------------------------------------------------------------------

TOKEN = "@@TOKEN@@"  # replaced by a raw token (a literal that a YAML/JSON dumper would not write)


def node(name: str = "n1", cpu: Any = "4", memory: Any = "8Gi", pods: Any = "110", **extra: Any) -> dict:
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                           "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods}}}
    for key, value in extra.items():
        section, _, name_ = key.partition("__")
        doc.setdefault(section, {})[name_] = value
    return doc


def pod(name: str = "p", cpu: Any = "100m", memory: Any = None, ns: str = "default", node_name: str | None = None,
        phase: str | None = None, container: dict | None = None, **extra: Any) -> dict:
    requests: dict[str, Any] = {"cpu": cpu}
    if memory is not None:
        requests["memory"] = memory
    c: dict[str, Any] = {"name": "c", "image": "nginx", "resources": {"requests": requests}}
    c.update(container or {})
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
                           "spec": {"containers": [c]}}
    if node_name is not None:
        doc["spec"]["nodeName"] = node_name
    if phase is not None:
        doc["status"] = {"phase": phase}
    for key, value in extra.items():
        section, _, name_ = key.partition("__")
        doc.setdefault(section, {})[name_] = value
    return doc


def ydump(*docs: Any, token: str | None = None) -> str:
    text = yaml.dump_all(docs, Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=True)
    return text if token is None else text.replace(f"'{TOKEN}'", token).replace(TOKEN, token)


def jdump(doc: Any, token: str | None = None) -> str:
    text = orjson.dumps(doc).decode()
    return text if token is None else text.replace(f'"{TOKEN}"', token)


CONFIG_HEAD = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def config(*profiles: dict, **top: Any) -> dict:
    return {**CONFIG_HEAD, **top, "profiles": list(profiles) or [{"schedulerName": "default-scheduler"}]}


def profile(name: str = "default-scheduler", **fields: Any) -> dict:
    return {"schedulerName": name, **fields}


def snapshot(metrics: Any, **top: Any) -> dict:
    return {"apiVersion": "scorer.dev/v1alpha1", "kind": "MetricsSnapshot", **top, "metrics": metrics}


VALID = {
    "cluster": ydump(node("n1"), pod("p")),
    "config": ydump(config()),
    "metrics": ydump(snapshot({"cpu_utilization": {"node-a1": 0.5}})),
}
VALID_JSON = {
    "cluster": jdump({"apiVersion": "v1", "kind": "List", "items": [node("n1"), pod("p")]}),
    "config": jdump(config()),
    "metrics": jdump(snapshot({"cpu_utilization": {"node-a1": 0.5}})),
}
# Where a raw number goes in a document of each kind.
WITH_TOKEN_YAML = {
    "cluster": ydump(node("n1", cpu=TOKEN), pod("p")),
    "config": ydump(config(profile(percentageOfNodesToScore=TOKEN))),
    "metrics": ydump(snapshot({"cpu_utilization": {"node-a1": TOKEN}})),
}
WITH_TOKEN_JSON = {
    "cluster": jdump({"apiVersion": "v1", "kind": "List", "items": [node("n1", cpu=TOKEN), pod("p")]}),
    "config": jdump(config(profile(percentageOfNodesToScore=TOKEN))),
    "metrics": jdump(snapshot({"cpu_utilization": {"node-a1": TOKEN}})),
}


def duplicate_first_key(text: str) -> str:
    first = text.splitlines()[0]
    return text.replace(first + "\n", f"{first}\n{first}\n", 1)


def duplicate_json_key(kind: str) -> str:
    text = VALID_JSON[kind]
    return text.replace('"kind":', '"kind":"Bogus","kind":', 1)


BIG_400 = "9" * 400
BIG_5000 = "7" * 5000


def billion_laughs(levels: int = 9, width: int = 9) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels + 1):
        refs = ",".join(f"*a{i - 1}" for _ in range(width))
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


def bomb_in_object(kind: str) -> str:
    """A billion-laughs mapping where the decoder of ``kind`` has to look at it."""
    bomb = "".join(f"    {line}\n" for line in billion_laughs().splitlines())
    if kind == "cluster":  # a kind scorer skips, then a pod whose labels hold the bomb
        return ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n" + bomb + "---\n"
                + ydump(node("n1")) + "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels:\n"
                + bomb + "spec: {containers: [{name: c}]}\n")
    if kind == "config":
        return ydump(config()).replace("profiles:\n- schedulerName: default-scheduler\n",
                                       "profiles:\n- schedulerName: default-scheduler\n  pluginConfig:\n"
                                       "  - name: NodeResourcesFit\n    args:\n" + bomb.replace("    ", "      "))
    return "kind: MetricsSnapshot\nmetrics:\n  cpu_utilization:\n" + bomb


def merge_bomb(levels: int = 24) -> str:
    lines = ["k0: &k0 {a0: 1, b0: 2}"]
    for i in range(1, levels + 1):
        lines.append(f"k{i}: &k{i} {{<<: [*k{i - 1}, *k{i - 1}], a{i}: [*k{i - 1}, *k{i - 1}]}}")
    return "\n".join(lines) + "\n"


Content = str | bytes | Callable[[], str | bytes]

# --- cases ----------------------------------------------------------------------------------------------


@dataclass
class Case:
    """``argv`` with ``{F}`` for the file ``files["F"]`` (and ``{C}``, ``{G}`` for others)."""

    id: str
    argv: list[str]
    files: dict[str, Content] = field(default_factory=dict)  # a callable: made when the case runs
    codes: frozenset[int] = frozenset({2})
    # Each must appear in an error line (or, with ``warn``, a warning line); a tuple: any one of its strings.
    # "{FILE}" is the name of the file F; the default for status 2 is ("{FILE}",).
    needles: tuple[str | tuple[str, ...], ...] | None = None
    warn: bool = False  # with status 0, a warning line naming the needles
    check: Callable[[Result], None] | None = None  # more checks for status 0
    isolate: bool = False  # a subprocess (with limits), for inputs that may crash or exhaust the process
    contrib: bool = False  # needs the contrib plugins (autoload on)
    special: str | None = None  # "fifo", "sparse", "unreadable": how {F} is made

    def param(self) -> Any:
        marks = [pytest.mark.slow] if self.isolate else []
        return pytest.param(self, id=self.id, marks=marks)


@dataclass
class Result:
    code: int | str
    out: str
    err: str
    runtime_warnings: list[str]


def placed(expected: dict[str, str | None]) -> Callable[[Result], None]:
    """Status 0 with ``simulate --output json``: each pod on the node given (None: not placed)."""

    def check(result: Result) -> None:
        placements = {p["pod"]: p["node"] for p in json.loads(result.out)["placements"]}
        for pod_key, node_name in expected.items():
            assert placements.get(pod_key, "<missing>") == node_name, (pod_key, placements)

    return check


def placed_on_one_of(pod_key: str, *nodes: str) -> Callable[[Result], None]:
    def check(result: Result) -> None:
        placements = {p["pod"]: p["node"] for p in json.loads(result.out)["placements"]}
        assert placements.get(pod_key) in nodes, placements

    return check


def selected(node_name: str | None) -> Callable[[Result], None]:
    def check(result: Result) -> None:
        assert json.loads(result.out)["selected"] == node_name

    return check


def out_has(*needles: str) -> Callable[[Result], None]:
    def check(result: Result) -> None:
        for needle in needles:
            assert needle in result.out, needle

    return check


def table_lines(count: int) -> Callable[[Result], None]:
    """The simulate table has exactly ``count`` pod rows (a name cannot forge one)."""

    def check(result: Result) -> None:
        lines = result.out.split("\n")
        blank = lines.index("")
        assert blank == count + 1, result.out
        assert all(not line.startswith(("forged", "shop/forged", "default/forged")) for line in lines), result.out

    return check


# Targets of the file-level cases: the argv, and the kind of document the file should hold.
TARGETS: dict[str, tuple[list[str], str]] = {
    "simulate-cluster": (["simulate", "--cluster", "{F}", "--output", "json"], "cluster"),
    "explain-cluster": (["explain", "--cluster", "{F}", "--pod", "default/p", "--output", "json"], "cluster"),
    "validate": (["config", "validate", "{F}"], "config"),
    "simulate-config": (["simulate", "--cluster", "{C}", "--config", "{F}", "--output", "json"], "config"),
    "simulate-metrics": (["simulate", "--metrics", "{F}", "--output", "json"], "metrics"),
}
ISOLATED_TARGETS = ("simulate-cluster", "validate", "simulate-metrics")


def valid_check(target: str) -> Callable[[Result], None]:
    kind = TARGETS[target][1]
    if target == "explain-cluster":
        return selected("n1")
    if kind == "cluster" or target == "simulate-config":
        return placed({"default/p": "n1"})
    if target == "validate":
        return out_has('profile "default-scheduler"')
    return lambda result: None


def file_cases() -> list[Case]:
    """The same hostile file contents (and paths) against every command that reads a file."""
    rng = random.Random(7)
    binary = rng.randbytes(4096)
    cases: list[Case] = []
    for target, (argv, kind) in TARGETS.items():
        valid = VALID[kind]
        files_base: dict[str, str | bytes] = {"C": VALID["cluster"]} if "{C}" in argv else {}
        empty_codes = frozenset({0, 2}) if kind == "cluster" else frozenset({2})
        # explain on an empty cluster: "pod not found" is right too, or an error about the file itself.
        empty_needles = (("{FILE}", "default/p"),) if target == "explain-cluster" else None

        def add(name: str, content: Content | None, codes: frozenset[int] = frozenset({2}),
                isolate: bool = False, path: str | None = None, needles: tuple[str, ...] | None = None,
                check: Callable[[Result], None] | None = None, special: str | None = None,
                target: str = target, argv: list[str] = argv, files_base: dict = files_base) -> None:
            if isolate and target not in ISOLATED_TARGETS:
                return
            files = dict(files_base)
            args = list(argv)
            if path is not None:
                args = [path if a == "{F}" else a for a in args]
            elif content is not None:
                files["F"] = content
            cases.append(Case(f"{target}-{name}", args, files, codes, needles,
                              check=check if check is not None else (valid_check(target) if 0 in codes else None),
                              isolate=isolate, special=special))

        ok_check = valid_check(target)
        add("empty", b"", empty_codes, needles=empty_needles, check=lambda r: None)
        add("blank-lines", "\n   \n\n", empty_codes, needles=empty_needles, check=lambda r: None)
        add("comment-only", "# nothing here\n", empty_codes, needles=empty_needles, check=lambda r: None)
        add("null-document", "null\n", empty_codes, needles=empty_needles, check=lambda r: None)
        add("separators-only", "---\n---\n...\n", empty_codes, needles=empty_needles, check=lambda r: None)
        add("nul-bytes", b"\0" * 64)
        add("random-binary", binary)
        add("gzip-of-valid", gzip.compress(valid.encode(), mtime=0))
        add("png-header", b"\x89PNG\r\n\x1a\n" + binary[:256])
        add("elf-header", b"\x7fELF\x02\x01\x01" + b"\0" * 57)
        add("utf16-with-bom", valid.encode("utf-16"))
        add("utf16-le-no-bom", valid.encode("utf-16-le"))
        add("utf32", valid.encode("utf-32"))
        add("utf8-bom", b"\xef\xbb\xbf" + valid.encode(), frozenset({0, 2}))
        add("latin1-byte", b"# caf\xe9\n" + valid.encode())
        add("overlong-utf8", valid.encode().replace(b"\n", b"\n# \xc0\xaf\n", 1))
        add("truncated-utf8", valid.encode() + b"# \xe2\x82\n")
        add("crlf", valid.replace("\n", "\r\n"), frozenset({0}), check=ok_check)
        add("cr-only", valid.replace("\n", "\r"), frozenset({0, 2}), check=ok_check)
        add("json-valid", VALID_JSON[kind], frozenset({0}), check=ok_check)
        add("yaml-unclosed-flow", "kind: [Node,\nmetadata: {name: x\n")
        add("yaml-bad-indent", "kind: Node\nmetadata:\n  name: a\n bad: indent\n")
        add("yaml-tab-indent", "kind: Node\nmetadata:\n\tname: x\n")
        add("json-trailing-comma", '{"apiVersion": "v1", "kind": "Node",}')
        add("json-truncated", VALID_JSON[kind][:-7])
        add("json-single-quotes", "{'kind': 'Node'}")
        add("scalar-document", "42\n")
        add("string-document", "hello world\n")
        add("list-of-ints", "[1, 2, 3]\n")
        add("python-tag", "!!python/object/apply:os.system ['echo pwned']\n")
        add("python-name-tag", "kind: !!python/name:os.system\n")
        add("custom-tag", "!Ref {kind: Node, metadata: {name: x}}\n")
        add("binary-tag", "kind: !!binary S2luZA==\n")
        add("set-tag", "!!set {a, b}\n")
        add("duplicate-key", duplicate_first_key(valid))
        add("duplicate-key-json", duplicate_json_key(kind))
        add("deep-nesting-200", "[" * 200 + "]" * 200 + "\n")
        add("long-comment-line", lambda valid=valid: "# " + "x" * 5_000_000 + "\n" + valid, frozenset({0, 2}),
            check=ok_check)
        for token_id, token, is_json in (
            ("json-nan", "NaN", True), ("json-infinity", "Infinity", True), ("json-minus-infinity", "-Infinity", True),
            ("json-1e400", "1e400", True), ("json-int-400-digits", BIG_400, True),
            ("json-int-5000-digits", BIG_5000, True),
            ("yaml-nan", ".nan", False), ("yaml-inf", ".inf", False), ("yaml-minus-inf", "-.inf", False),
            ("yaml-1e400", "1.0e+400", False), ("yaml-int-400-digits", BIG_400, False),
            ("yaml-int-5000-digits", BIG_5000, False), ("yaml-neg-int-5000-digits", "-" + BIG_5000, False),
        ):
            text = (WITH_TOKEN_JSON if is_json else WITH_TOKEN_YAML)[kind].replace(
                f'"{TOKEN}"' if is_json else f"'{TOKEN}'", token)
            add(f"number-{token_id}", text)
        # Paths that are not regular files, or not there.
        add("dev-null", None, empty_codes, path="/dev/null", needles=(("/dev/null", "default/p"),),
            check=lambda r: None)
        add("directory", None, path="{TMP}", needles=("{TMP}",))
        add("missing-file", None, path="{TMP}/no-such-file.yaml", needles=("no-such-file.yaml",))
        add("missing-file-escape-in-name", None, path="{TMP}/no\x1b[31m\nsuch\u202e.yaml",
            needles=("no\\x1b[31m\\nsuch\\u202e.yaml",))
        add("unreadable", None, special="unreadable", path="{TMP}/unreadable.yaml", needles=("unreadable.yaml",))
        # Inputs that can crash or exhaust the process: in a subprocess.
        add("deep-flow-sequence-30000", lambda: "[" * 30000 + "]" * 30000 + "\n", isolate=True)
        add("deep-flow-mapping-30000", lambda: '{"a":' * 30000 + "1" + "}" * 30000 + "\n", isolate=True)
        add("deep-block-sequence-30000", lambda: "- " * 30000 + "x\n", isolate=True)
        add("deep-open-brackets-only-100000", lambda: "[" * 100000, isolate=True)
        add("alias-bomb", billion_laughs, isolate=True)
        add("alias-bomb-merge-keys", merge_bomb, isolate=True)
        add("alias-bomb-in-object", lambda kind=kind: bomb_in_object(kind), isolate=True)
        add("alias-fanout", lambda: "a: &a [" + ",".join(["x"] * 2000) + "]\nb: [" + ",".join(["*a"] * 20000)
            + "]\n", isolate=True)
        add("empty-documents-300000", lambda: "---\n" * 300000, empty_codes, isolate=True, check=lambda r: None)
        add("dev-zero", None, isolate=True, path="/dev/zero", needles=("/dev/zero",))
        add("dev-urandom", None, isolate=True, path="/dev/urandom", needles=("/dev/urandom",))
        add("fifo-without-writer", None, isolate=True, special="fifo", path="{TMP}/fifo.yaml", needles=("fifo.yaml",))
        add("sparse-4GiB", None, isolate=True, special="sparse", path="{TMP}/huge.yaml", needles=("huge.yaml",))
    return cases


def cluster_case(name: str, *docs: Any, codes: frozenset[int] = frozenset({2}), text: Content | None = None,
                 needles: tuple[str, ...] | None = None, warn: bool = False,
                 check: Callable[[Result], None] | None = None, table: bool = False) -> Case:
    content = text if text is not None else ydump(*docs)
    argv = ["simulate", "--cluster", "{F}"] + ([] if table else ["--output", "json"])
    return Case(f"cluster-{name}", argv, {"F": content}, codes, needles, warn, check)


def raw(*docs: Any, token: str) -> str:
    return ydump(*docs, token=token)


FULL_NODE = node("n1", cpu="1", memory="1Gi")
ZERO_TO_TWO = frozenset({0, 2})
FORGED = "x\nforged  n1  100  forged-line\x1b[2J\x1b]0;title\x07\u202e"


def cluster_cases() -> list[Case]:
    n1 = node("n1")
    p = pod("p")
    cases = [
        # Kinds and versions scorer does not read: an error, or a warning naming them.
        cluster_case("kind-lowercase-pod", n1, {**p, "kind": "pod"}, codes=ZERO_TO_TWO, needles=("pod",), warn=True),
        cluster_case("kind-Pods", n1, {**p, "kind": "Pods"}, codes=ZERO_TO_TWO, needles=("Pods",), warn=True),
        cluster_case("apiVersion-v2", n1, {**p, "apiVersion": "v2"}, codes=ZERO_TO_TWO, needles=("v2",), warn=True),
        cluster_case("apiVersion-apps-v1-pod", n1, {**p, "apiVersion": "apps/v1"}, codes=ZERO_TO_TWO,
                     needles=("apps/v1",), warn=True),
        cluster_case("deployment", n1, p, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                                           "spec": {"replicas": 3}},
                     codes=ZERO_TO_TWO, needles=("Deployment",), warn=True, check=placed({"default/p": "n1"})),
        cluster_case("config-as-cluster", config(), codes=ZERO_TO_TWO, needles=("KubeSchedulerConfiguration",),
                     warn=True),
        cluster_case("kind-missing", {k: v for k, v in p.items() if k != "kind"}),
        cluster_case("kind-integer", {**p, "kind": 5}),
        cluster_case("kind-list-value", {**p, "kind": ["Pod"]}),
        cluster_case("apiVersion-integer", {**p, "apiVersion": 1}, codes=ZERO_TO_TWO, needles=("apiVersion",),
                     warn=True),
        cluster_case("metadata-missing", {k: v for k, v in p.items() if k != "metadata"}),
        cluster_case("metadata-string", {**p, "metadata": "p"}),
        cluster_case("name-missing", {**p, "metadata": {"namespace": "default"}}),
        cluster_case("name-empty", {**p, "metadata": {"name": ""}}),
        cluster_case("name-integer", {**p, "metadata": {"name": 123}}),
        cluster_case("name-date", text="apiVersion: v1\nkind: Node\nmetadata: {name: 2024-01-01}\n",
                     codes=ZERO_TO_TWO, check=lambda r: None),
        cluster_case("name-10MB", text=lambda: ydump(node("n1"), pod("p" * 10_000_000)), codes=ZERO_TO_TWO,
                     check=lambda r: None),
        cluster_case("namespace-integer", {**p, "metadata": {"name": "p", "namespace": 5}}),
        cluster_case("labels-string", node("n1", metadata__labels="zone=a"), needles=("labels",)),
        cluster_case("label-value-mapping", node("n1", metadata__labels={"zone": {"a": 1}}), needles=("labels",)),
        # Names with newlines and escape sequences: placed correctly, printed escaped.
        cluster_case("names-forge-table-lines", node(FORGED), pod(FORGED), pod("q\x1b[31m", ns="a\u202eb"),
                     codes=ZERO_TO_TWO, table=True, check=table_lines(2)),
        cluster_case("names-forge-json", node(FORGED), pod(FORGED), codes=ZERO_TO_TWO,
                     check=placed({f"default/{FORGED}": FORGED})),
        cluster_case("scheduler-name-forges-ignored-line", n1, pod("p", spec__schedulerName="x\nforged\x1b[8m"),
                     codes=ZERO_TO_TWO, table=True, check=table_lines(0)),
        # Duplicates.
        cluster_case("duplicate-node-names", node("n1"), node("n1", cpu="8"), p, needles=("n1",)),
        cluster_case("duplicate-pod-names", n1, pod("p"), pod("p", cpu="200m"), needles=("default/p",)),
        cluster_case("duplicate-namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}},
                     {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}, n1, needles=("a",)),
        cluster_case("same-pod-name-two-namespaces", n1, pod("p", ns="a"), pod("p", ns="b"), codes=frozenset({0}),
                     check=placed({"a/p": "n1", "b/p": "n1"})),
        # Bound pods.
        cluster_case("bound-pod-on-missing-node", n1, pod("ghost", node_name="nowhere"), p, codes=ZERO_TO_TWO,
                     needles=("ghost",), warn=True, check=placed({"default/p": "n1"})),
        cluster_case("succeeded-pod-on-full-node", FULL_NODE,
                     pod("done", cpu="1", memory="1Gi", node_name="n1", phase="Succeeded"),
                     pod("p", cpu="500m", memory="512Mi"), codes=frozenset({0}), check=placed({"default/p": "n1"})),
        cluster_case("failed-pod-on-full-node", FULL_NODE,
                     pod("crashed", cpu="1", memory="1Gi", node_name="n1", phase="Failed"),
                     pod("p", cpu="500m", memory="512Mi"), codes=frozenset({0}), check=placed({"default/p": "n1"})),
        cluster_case("running-pod-on-full-node", FULL_NODE,
                     pod("busy", cpu="1", memory="1Gi", node_name="n1", phase="Running"),
                     pod("p", cpu="500m", memory="512Mi"), codes=frozenset({0}), check=placed({"default/p": None})),
        cluster_case("phase-integer", n1, pod("x", node_name="n1", phase=5), p, needles=("phase",)),
        cluster_case("node-name-integer", n1, {**p, "spec": {**p["spec"], "nodeName": 5}}, needles=("nodeName",)),
        cluster_case("scheduler-name-integer", n1, pod("p", spec__schedulerName=5), needles=("schedulerName",)),
        cluster_case("nominated-node-missing", n1, pod("p", status__nominatedNodeName="nowhere"), codes=ZERO_TO_TWO,
                     check=placed({"default/p": "n1"})),
        # Quantities that cannot be represented, or make no sense.
        cluster_case("4Ei-times-3-on-1Gi-node", node("n1", memory="1Gi"),
                     *[pod(f"big{i}", memory="4Ei", node_name="n1") for i in range(3)],
                     pod("p", memory="512Mi"), needles=("memory",)),
        cluster_case("8Ei-memory-request", n1, pod("p", memory="8Ei"), needles=("memory",)),
        cluster_case("cpu-1e400", n1, pod("p", cpu="1e400"), needles=("cpu",)),
        cluster_case("cpu-int64-max-cores", n1, pod("p", cpu="9223372036854775807"), needles=("cpu",)),
        cluster_case("cpu-negative", n1, pod("p", cpu="-1"), needles=("cpu",)),
        cluster_case("cpu-minus-zero", n1, pod("p", cpu="-0"), codes=ZERO_TO_TWO, needles=("cpu",),
                     check=placed({"default/p": "n1"})),
        cluster_case("cpu-1e-30", n1, pod("p", cpu="1e-30"), codes=ZERO_TO_TWO, needles=("cpu",),
                     check=placed({"default/p": "n1"})),
        cluster_case("memory-1e-30", n1, pod("p", memory="1e-30"), codes=ZERO_TO_TWO, needles=("memory",),
                     check=placed({"default/p": "n1"})),
        cluster_case("node-cpu-1e400", node("n1", cpu="1e400"), p, needles=("cpu",)),
        cluster_case("node-memory-negative", node("n1", memory="-1Gi"), p, needles=("memory",)),
        cluster_case("node-pods-1e30", node("n1", pods="1e30"), p, needles=("pods",)),
        cluster_case("node-allocatable-string", {**n1, "status": {"allocatable": "lots"}}, p,
                     needles=("allocatable",)),
        cluster_case("node-allocatable-list", {**n1, "status": {"allocatable": [1, 2]}}, p, needles=("allocatable",)),
        cluster_case("node-cpu-huge-raw", text=raw(node("n1", cpu=TOKEN), p, token=BIG_400), needles=("cpu",)),
        cluster_case("json-lone-surrogate-name", text=jdump({"apiVersion": "v1", "kind": "List", "items": [
            node("n1"), pod(TOKEN)]}, token='"p\\ud800"'), codes=ZERO_TO_TWO, needles=("name",),
            check=lambda r: None),
        cluster_case("yaml-lone-surrogate-name", text=raw(node("n1"), pod(TOKEN), token='"p\\udc80"'),
                     codes=ZERO_TO_TWO, needles=("name",), check=lambda r: None),
        cluster_case("yaml-nul-in-name", text=raw(node("n1"), pod(TOKEN), token='"p\\0q"'), codes=ZERO_TO_TWO,
                     needles=("name",), check=lambda r: None),
    ]
    # kube trims the spaces around a quantity (Quantity.UnmarshalJSON): " 1" may be accepted.
    cases.append(cluster_case("cpu-leading-space", n1, pod("p", cpu=" 1"), codes=ZERO_TO_TWO, needles=("cpu",),
                              check=placed({"default/p": "n1"})))
    for qid, value in (("empty", ""), ("space-unit", "1 Gi"), ("hex", "0x10"),
                       ("nan", "NaN"), ("infinity", "Infinity"), ("inf", "inf"), ("double-dot", "1.5.5"),
                       ("unit-only", "Mi"), ("unknown-unit", "5Xi"), ("exponent-unit", "1e18Ei"),
                       ("400-digits-string", BIG_400), ("unicode-digits", "١٢"), ("fullwidth", "１"),
                       ("newline", "1\n2")):
        cases.append(cluster_case(f"cpu-{qid}", n1, pod("p", cpu=value), needles=("cpu",)))
    for qid, token in (("true", "true"), ("list", "[1]"), ("mapping", "{a: 1}"), ("float-1e308", "1.0e+308"),
                       ("int-5000-digits", BIG_5000), ("yaml-nan", ".nan"), ("yaml-inf", ".inf")):
        cases.append(cluster_case(f"cpu-raw-{qid}", text=raw(n1, pod("p", cpu=TOKEN), token=token),
                                  needles=("cpu",)))
    cases.append(cluster_case("cpu-null", text=raw(n1, pod("p", cpu=TOKEN), token="null"), codes=ZERO_TO_TWO,
                              needles=("cpu",), check=placed({"default/p": "n1"})))
    image = {"names": ["registry/app:1"], "sizeBytes": TOKEN}
    cases.append(cluster_case("image-size-negative", text=raw(node("n1", status__images=[image]), p, token="-1"),
                              codes=ZERO_TO_TWO, needles=("sizeBytes",), check=placed({"default/p": "n1"})))
    for iid, token in (("2-pow-70", str(2**70)), ("string", "big"), ("float-1e30", "1.0e+30"),
                       ("5000-digits", BIG_5000), ("nan", ".nan")):
        cases.append(cluster_case(f"image-size-{iid}", text=raw(node("n1", status__images=[image]), p, token=token),
                                  needles=("sizeBytes",)))
    cases += [
        cluster_case("images-not-list", node("n1", status__images="app"), p, needles=("images",)),
        cluster_case("image-names-not-list", node("n1", status__images=[{"names": "app", "sizeBytes": 1}]), p,
                     needles=("names",)),
        cluster_case("taint-effect-unknown", node("n1", spec__taints=[{"key": "k", "effect": "Bogus"}]), p,
                     needles=("effect",)),
        cluster_case("taints-string", node("n1", spec__taints="k=v:NoSchedule"), p, needles=("taints",)),
        cluster_case("toleration-operator-unknown",
                     n1, pod("p", spec__tolerations=[{"key": "k", "operator": "Bogus"}]), needles=("operator",)),
        cluster_case("toleration-seconds-string",
                     n1, pod("p", spec__tolerations=[{"key": "k", "effect": "NoExecute", "tolerationSeconds": "x"}]),
                     needles=("tolerationSeconds",)),
        cluster_case("node-selector-list", n1, pod("p", spec__nodeSelector=["zone=a"]), needles=("nodeSelector",)),
        cluster_case("node-selector-value-int", n1, pod("p", spec__nodeSelector={"zone": 1}),
                     needles=("nodeSelector",)),
        cluster_case("affinity-operator-unknown", n1, pod("p", spec__affinity={"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "k", "operator": "Near", "values": ["a"]}]}]}}}), needles=("operator",)),
        cluster_case("affinity-values-string", n1, pod("p", spec__affinity={"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "k", "operator": "In", "values": "a"}]}]}}}), needles=("values",)),
        cluster_case("affinity-weight-101", n1, pod("p", spec__affinity={"nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 101, "preference": {"matchExpressions": [{"key": "k", "operator": "Exists"}]}}]}}),
            needles=("weight",)),
        cluster_case("affinity-weight-0", n1, pod("p", spec__affinity={"nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 0, "preference": {"matchExpressions": [{"key": "k", "operator": "Exists"}]}}]}}),
            needles=("weight",)),
        cluster_case("containers-missing", n1, {**p, "spec": {}}, codes=ZERO_TO_TWO, needles=("containers",),
                     check=placed({"default/p": "n1"})),
        cluster_case("containers-mapping", n1, {**p, "spec": {"containers": {"name": "c"}}}, needles=("containers",)),
        cluster_case("container-integer", n1, {**p, "spec": {"containers": [5]}}, needles=("containers",)),
        cluster_case("resources-string", n1, pod("p", container={"resources": "big"}), needles=("resources",)),
        cluster_case("host-port-70000", n1, pod("p", container={"ports": [{"containerPort": 80, "hostPort": 70000}]}),
                     needles=("hostPort",)),
        cluster_case("host-port-negative", n1, pod("p", container={"ports": [{"containerPort": 80, "hostPort": -1}]}),
                     needles=("hostPort",)),
        cluster_case("port-string", n1, pod("p", container={"ports": [{"containerPort": "80", "hostPort": "80"}]}),
                     needles=("Port",)),
        cluster_case("port-protocol-unknown", n1, pod("p", container={
            "ports": [{"containerPort": 80, "hostPort": 80, "protocol": "XTP"}]}), needles=("protocol",)),
        cluster_case("priority-2-pow-40", n1, pod("p", spec__priority=2**40), needles=("priority",)),
        cluster_case("priority-string", n1, pod("p", spec__priority="high"), needles=("priority",)),
        cluster_case("priority-1e400", text=raw(n1, pod("p", spec__priority=TOKEN), token="1.0e+400"),
                     needles=("priority",)),
        cluster_case("overhead-negative", n1, pod("p", spec__overhead={"cpu": "-1"}), needles=("overhead",)),
        cluster_case("unschedulable-string", node("n1", spec__unschedulable="yes"), p, needles=("unschedulable",)),
        cluster_case("list-items-string", {"apiVersion": "v1", "kind": "List", "items": "pods"}, needles=("items",)),
        cluster_case("list-item-integer", {"apiVersion": "v1", "kind": "List", "items": [n1, 5]}, needles=("items",)),
        cluster_case("list-in-list", {"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "List", "items": [n1, p]}]}, codes=ZERO_TO_TWO, needles=("List",),
            warn=True, check=placed({"default/p": "n1"})),
        cluster_case("anchors-and-aliases", text=(
            "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n1}, status: "
            "{allocatable: &cap {cpu: '4', memory: 8Gi, pods: '110'}}}\n- {apiVersion: v1, kind: Node, "
            "metadata: {name: n2}, status: {allocatable: *cap}}\n- " + jdump(p) + "\n"),
            codes=frozenset({0}), check=placed_on_one_of("default/p", "n1", "n2")),
        cluster_case("merge-keys", text=(
            "apiVersion: v1\nkind: Node\nmetadata: &m {name: n1}\nstatus: {allocatable: {<<: {cpu: '4', "
            "memory: 8Gi}, pods: '110'}}\n---\n" + ydump(p)), codes=ZERO_TO_TWO, check=placed({"default/p": "n1"})),
        cluster_case("two-thousand-nodes", text=lambda: ydump(*[node(f"n{i}") for i in range(2000)], pod("p")),
                     codes=frozenset({0}), check=lambda r: None),
        # An invalid MetricsSnapshot in a cluster file: the error names the file and the real document.
        cluster_case("snapshot-in-cluster-bad-value", n1, p, snapshot({"cpu_utilization": {"n1": "abc"}}),
                     needles=("{FILE}", "document 3")),
        cluster_case("snapshot-in-cluster-nan", text=raw(n1, p, snapshot({"cpu_utilization": {"n1": TOKEN}}),
                                                        token=".nan"), needles=("{FILE}", "document 3")),
        cluster_case("snapshot-in-list-bad-value", {"apiVersion": "v1", "kind": "List", "items": [
            n1, p, snapshot({"cpu_utilization": {"n1": "abc"}})]}, needles=("{FILE}", "document 1")),
    ]
    # explain: the pod reference itself.
    for rid, ref in (("empty", ""), ("slash", "/"), ("three-parts", "a/b/c"), ("namespace-only", "default/"),
                     ("name-only-slash", "/p"), ("escape", "default/p\x1b[31m\n")):
        cases.append(Case(f"explain-pod-ref-{rid}", ["explain", "--cluster", "{F}", "--pod", ref],
                          {"F": ydump(n1, p)}, frozenset({2}), needles=("pod",)))
    cases.append(Case("explain-bound-pod", ["explain", "--cluster", "{F}", "--pod", "default/b", "--output", "json"],
                      {"F": ydump(n1, pod("b", node_name="n1"))}, frozenset({0}), check=selected("n1")))
    cases.append(Case("explain-forged-names-table", ["explain", "--cluster", "{F}", "--pod", f"default/{FORGED}"],
                      {"F": ydump(node(FORGED), pod(FORGED))}, ZERO_TO_TWO,
                      check=lambda r: _no_forged_line(r.out)))
    return cases


def _no_forged_line(out: str) -> None:
    assert not any(line.startswith(("forged", 'profile "forged"')) for line in out.splitlines()), out


METRIC_CONFIG = ydump(config(profile(plugins={"multiPoint": {"enabled": [{"name": "LoadAware"}]}})))


def snapshot_case(name: str, text: str, codes: frozenset[int] = frozenset({2}), needles: tuple[str, ...] | None = None,
                  warn: bool = False, check: Callable[[Result], None] | None = None, contrib: bool = False) -> Case:
    """``simulate --metrics F`` on the built-in demo cluster (with LoadAware reading it when ``contrib``)."""
    if contrib:
        return Case(f"metrics-{name}", ["simulate", "--cluster", "{C}", "--config", "{G}", "--metrics", "{F}",
                                        "--output", "json"],
                    {"F": text, "C": DEMO_LIKE_CLUSTER, "G": METRIC_CONFIG}, codes, needles, warn, check,
                    contrib=True)
    return Case(f"metrics-{name}", ["simulate", "--metrics", "{F}", "--output", "json"], {"F": text}, codes,
                needles, warn, check)


DEMO_LIKE_CLUSTER = ydump(node("node-a1"), node("node-a2"), pod("p"))


def snap_raw(token: str, metric: str = "cpu_utilization", node_name: str = "node-a1") -> str:
    return ydump(snapshot({metric: {node_name: TOKEN}}), token=token)


def snapshot_cases() -> list[Case]:
    cases = []
    for sid, token in (("yaml-nan", ".nan"), ("yaml-inf", ".inf"), ("yaml-minus-inf", "-.inf"),
                       ("1e400", "1.0e+400"), ("string", "abc"), ("true", "true"),
                       ("list", "[0.5]"), ("value-string", "{value: x}"), ("value-nan", "{value: .nan}"),
                       ("age-negative", "{value: 0.5, age: -5m}"), ("age-forever", "{value: 0.5, age: forever}"),
                       ("age-1e400", "{value: 0.5, age: 1.0e+400}"), ("unknown-entry-key", "{value: 0.5, when: 1}"),
                       ("int-400-digits", BIG_400), ("int-5000-digits", BIG_5000)):
        cases.append(snapshot_case(sid, snap_raw(token), needles=("cpu_utilization",)))
    for sid, token in (("json-nan", "NaN"), ("json-infinity", "Infinity"), ("json-5000-digits", BIG_5000)):
        cases.append(snapshot_case(sid, jdump(snapshot({"cpu_utilization": {"node-a1": TOKEN}}), token=token),
                                   needles=("cpu_utilization",)))
    cases += [
        snapshot_case("negative-value", snap_raw("-0.5"), ZERO_TO_TWO, needles=("node-a1",), warn=True),
        snapshot_case("numeric-string", snap_raw("'0.5'"), ZERO_TO_TWO, needles=("cpu_utilization",),
                      check=lambda r: None),
        snapshot_case("duplicate-node-key", "kind: MetricsSnapshot\nmetrics:\n  cpu_utilization:\n"
                      "    node-a1: 0.5\n    node-a1: 0.9\n", needles=("node-a1",)),
        snapshot_case("duplicate-metric-key", "kind: MetricsSnapshot\nmetrics:\n  cpu_utilization: {}\n"
                      "  cpu_utilization: {}\n", needles=("cpu_utilization",)),
        snapshot_case("integer-node-key", "kind: MetricsSnapshot\nmetrics:\n  cpu_utilization: {123: 0.5}\n",
                      needles=("123",)),
        snapshot_case("null-node-key", "kind: MetricsSnapshot\nmetrics:\n  cpu_utilization: {null: 0.5}\n",
                      needles=("cpu_utilization",)),
        snapshot_case("apiVersion-v9", ydump(snapshot({"cpu_utilization": {}}, apiVersion="v9")), ZERO_TO_TWO,
                      needles=("v9",), warn=True),
        snapshot_case("kind-typo", ydump({"kind": "MetricSnapshot", "metrics": {}})),
        snapshot_case("kind-lowercase", ydump({"kind": "metricssnapshot", "metrics": {}})),
        snapshot_case("metrics-list", ydump({"kind": "MetricsSnapshot", "metrics": [1]}), needles=("metrics",)),
        snapshot_case("metrics-missing", ydump({"kind": "MetricsSnapshot"}), needles=("metrics",)),
        snapshot_case("metric-name-empty", ydump(snapshot({"": {"node-a1": 0.5}})), needles=("metric",)),
        snapshot_case("metrics-nested-deep", ydump(snapshot({"cpu_utilization": {"node-a1": {"value": {
            "value": 0.5}}}})), needles=("cpu_utilization",)),
        snapshot_case("empty-metrics", ydump(snapshot({})), frozenset({0}), check=lambda r: None),
        snapshot_case("null-value", ydump(snapshot({"cpu_utilization": {"node-a1": None}})), frozenset({0}),
                      check=lambda r: None),
        snapshot_case("subnormal-value", snap_raw("1.0e-320"), frozenset({0}), check=lambda r: None),
        snapshot_case("metric-name-escape", ydump(snapshot({"cpu\n\x1b[31m": {"node-a1": 0.5}})), ZERO_TO_TWO,
                      check=lambda r: None),
        # Read by a metric-driven plugin (LoadAware, contrib).
        snapshot_case("unknown-node-key", snap_raw("0.5", node_name="node-zz"), ZERO_TO_TWO, needles=("node-zz",),
                      warn=True, contrib=True),
        snapshot_case("near-float-max", ydump(snapshot({"cpu_utilization": {"node-a1": 1.7e308, "node-a2": 0.1}})),
                      ZERO_TO_TWO, needles=("cpu_utilization",), contrib=True, check=placed({"default/p": "node-a2"})),
        snapshot_case("contrib-negative", snap_raw("-5"), ZERO_TO_TWO, needles=("node-a1",), warn=True,
                      contrib=True),
        snapshot_case("contrib-valid", ydump(snapshot({"cpu_utilization": {"node-a1": 0.9, "node-a2": 0.1}})),
                      frozenset({0}), contrib=True, check=placed({"default/p": "node-a2"})),
    ]
    return cases


def config_case(name: str, content: str | dict, codes: frozenset[int] = frozenset({2}),
                needles: tuple[str, ...] | None = None, warn: bool = False, contrib: bool = False,
                check: Callable[[Result], None] | None = None, simulate: bool = False) -> Case:
    text = ydump(content) if isinstance(content, dict) else content
    if simulate:
        return Case(f"config-simulate-{name}", ["simulate", "--cluster", "{C}", "--config", "{F}", "--output", "json"],
                    {"F": text, "C": VALID["cluster"]}, codes, needles, warn, check, contrib=contrib)
    return Case(f"config-{name}", ["config", "validate", "{F}"], {"F": text}, codes, needles, warn, check,
                contrib=contrib)


def plugins(*enabled: dict, point: str = "multiPoint") -> dict:
    return {point: {"enabled": list(enabled)}}


def fit_args(**strategy: Any) -> dict:
    return {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "LeastAllocated", **strategy}}}


def contrib_config(plugin: str, args: dict) -> dict:
    return config(profile(plugins=plugins({"name": plugin}), pluginConfig=[{"name": plugin, "args": args}]))


def cfg_raw(content: dict, token: str) -> str:
    return ydump(content, token=token)


def cfg_json(content: dict, token: str) -> str:
    return jdump(content, token=token)


def config_cases() -> list[Case]:
    ok = frozenset({0})
    cases = [
        config_case("apiVersion-integer", {**config(), "apiVersion": 1}, needles=("apiVersion",)),
        config_case("apiVersion-v2", {**config(), "apiVersion": "kubescheduler.config.k8s.io/v2"},
                    needles=("apiVersion",)),
        config_case("kind-lowercase", {**config(), "kind": "kubeschedulerconfiguration"}, needles=("kind",)),
        config_case("kind-missing", {k: v for k, v in config().items() if k != "kind"}, needles=("kind",)),
        config_case("profiles-string", {**CONFIG_HEAD, "profiles": "default"}, needles=("profiles",)),
        config_case("profiles-integers", {**CONFIG_HEAD, "profiles": [1]}, needles=("profiles[0]",)),
        config_case("profiles-empty", {**CONFIG_HEAD, "profiles": []}, ZERO_TO_TWO, needles=("profiles",),
                    check=lambda r: None),
        config_case("profile-empty-mapping", {**CONFIG_HEAD, "profiles": [{}]}, ZERO_TO_TWO,
                    needles=("schedulerName",), check=lambda r: None),
        config_case("scheduler-name-integer", config(profile(5)), needles=("schedulerName",)),
        config_case("scheduler-names-duplicate", config(profile("a"), profile("a")), needles=("schedulerName",)),
        config_case("scheduler-name-empty-of-two", config(profile(""), profile("b")), needles=("schedulerName",)),
        config_case("scheduler-name-forged", config(profile("a\nprofile \"forged\" (x)\x1b[8m")), ZERO_TO_TWO,
                    needles=("schedulerName",), check=lambda r: _no_forged_line(r.out)),
        config_case("top-level-unknown-field", {**config(), "bogus": 1}, needles=("bogus",)),
        config_case("profile-unknown-field", config(profile(bogus=1)), needles=("bogus",)),
        config_case("plugins-list", config(profile(plugins=[])), needles=("plugins",)),
        config_case("plugin-set-string", config(profile(plugins={"score": "NodeResourcesFit"})), needles=("score",)),
        config_case("enabled-mapping", config(profile(plugins={"score": {"enabled": {"name": "NodeResourcesFit"}}})),
                    needles=("enabled",)),
        config_case("plugin-name-integer", config(profile(plugins=plugins({"name": 1}))), needles=("name",)),
        config_case("plugin-name-missing", config(profile(plugins=plugins({"weight": 1}))), needles=("name",)),
        config_case("plugin-unknown", config(profile(plugins=plugins({"name": "NoSuchPlugin"}))),
                    needles=("NoSuchPlugin",)),
        config_case("plugin-unknown-escape", config(profile(plugins=plugins({"name": "No\nSuch\x1b[31m"}))),
                    needles=("No\\nSuch\\x1b[31m",)),
        config_case("disabled-string", config(profile(plugins={"score": {"disabled": "*"}})), needles=("disabled",)),
        config_case("disabled-star", config(profile(plugins={"score": {"disabled": [{"name": "*"}]}})), ok,
                    check=out_has("score:")),
        config_case("pluginConfig-mapping", config(profile(pluginConfig={})), needles=("pluginConfig",)),
        config_case("pluginConfig-name-integer", config(profile(pluginConfig=[{"name": 1, "args": {}}])),
                    needles=("pluginConfig[0]",)),
        config_case("pluginConfig-name-missing", config(profile(pluginConfig=[{"args": {}}])),
                    needles=("pluginConfig[0]",)),
        config_case("pluginConfig-args-string", config(profile(pluginConfig=[{"name": "NodeResourcesFit",
                                                                              "args": "x"}])), needles=("args",)),
        config_case("pluginConfig-args-list", config(profile(pluginConfig=[{"name": "NodeResourcesFit",
                                                                            "args": [1]}])), needles=("args",)),
        config_case("pluginConfig-unknown-plugin", config(profile(pluginConfig=[{"name": "Nope", "args": {}}])),
                    ZERO_TO_TWO, needles=("Nope",), warn=True),
        config_case("pluginConfig-duplicate", config(profile(pluginConfig=[fit_args(), fit_args()])),
                    needles=("pluginConfig[1]",)),
        config_case("fit-args-unknown-key", config(profile(pluginConfig=[{"name": "NodeResourcesFit",
                                                                          "args": {"bogus": 1}}])), needles=("bogus",)),
        config_case("fit-strategy-unknown", config(profile(pluginConfig=[fit_args(type="Bogus")])),
                    needles=("type",)),
        config_case("fit-resource-weight-0", config(profile(pluginConfig=[fit_args(resources=[
            {"name": "cpu", "weight": 0}])])), ZERO_TO_TWO, needles=("weight",), check=lambda r: None),  # 0 -> 1
        config_case("fit-resource-weight-101", config(profile(pluginConfig=[fit_args(resources=[
            {"name": "cpu", "weight": 101}])])), needles=("weight",)),
        config_case("fit-shape-utilization-101", config(profile(pluginConfig=[fit_args(
            type="RequestedToCapacityRatio", requestedToCapacityRatio={"shape": [{"utilization": 101, "score": 1}]})])),
            needles=("utilization",)),
        config_case("fit-shape-score-11", config(profile(pluginConfig=[fit_args(
            type="RequestedToCapacityRatio", requestedToCapacityRatio={"shape": [{"utilization": 50, "score": 11}]})])),
            needles=("score",)),
        config_case("fit-resource-weight-json-nan", cfg_json(config(profile(pluginConfig=[fit_args(resources=[
            {"name": "cpu", "weight": TOKEN}])])), "NaN"), needles=("weight",)),
        config_case("fit-shape-json-nan", cfg_json(config(profile(pluginConfig=[fit_args(
            type="RequestedToCapacityRatio", requestedToCapacityRatio={"shape": [
                {"utilization": TOKEN, "score": 1}]})])), "NaN"), needles=("utilization",)),
        config_case("fit-resource-weight-1e400", cfg_raw(config(profile(pluginConfig=[fit_args(resources=[
            {"name": "cpu", "weight": TOKEN}])])), "1.0e+400"), needles=("weight",)),
        config_case("backoff-negative", config(podInitialBackoffSeconds=-1), needles=("podInitialBackoffSeconds",)),
        config_case("backoff-max-below-initial", config(podInitialBackoffSeconds=10, podMaxBackoffSeconds=1),
                    needles=("podMaxBackoffSeconds",)),
        config_case("backoff-string", config(podMaxBackoffSeconds="x"), needles=("podMaxBackoffSeconds",)),
        config_case("backoff-5000-digits", cfg_raw(config(podMaxBackoffSeconds=TOKEN), BIG_5000),
                    needles=("podMaxBackoffSeconds",)),
        config_case("parallelism-string", config(parallelism="8"), needles=("parallelism",)),
        config_case("parallelism-zero", config(parallelism=0), needles=("parallelism",)),
        config_case("parallelism-huge", cfg_raw(config(parallelism=TOKEN), BIG_400), needles=("parallelism",)),
        config_case("leader-election-string", config(leaderElection="yes"), needles=("leaderElection",)),
        config_case("client-connection-qps-string", config(clientConnection={"qps": "x"}), needles=("qps",)),
        config_case("extenders-garbage", config(extenders=[{"urlPrefix": 5}]), needles=("extenders",)),
        config_case("cluster-file-as-config", VALID["cluster"]),
        config_case("snapshot-as-config", VALID["metrics"], needles=("kind",)),
        config_case("multiple-documents", ydump(config(), config()), needles=("document",)),
        config_case("legacy-v1beta1-bad-weight", ydump({
            "apiVersion": "kubescheduler.config.k8s.io/v1beta1", "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "x", "plugins": {"score": {"enabled": [
                {"name": "NodeResourcesLeastAllocated", "weight": -3}]}}}]}), ZERO_TO_TWO, needles=("weight",),
            warn=True),
    ]
    for pid, token in (("string", "'50'"), ("negative", "-1"), ("101", "101"), ("1e400", "1.0e+400"),
                       ("fraction", "50.5"), ("true", "true"), ("5000-digits", BIG_5000)):
        cases.append(config_case(f"percentage-{pid}", cfg_raw(config(profile(percentageOfNodesToScore=TOKEN)), token),
                                 needles=("percentageOfNodesToScore",)))
        cases.append(config_case(f"global-percentage-{pid}", cfg_raw(config(percentageOfNodesToScore=TOKEN), token),
                                 needles=("percentageOfNodesToScore",)))
    for pid, token in (("nan", "NaN"), ("infinity", "Infinity")):
        cases.append(config_case(f"percentage-json-{pid}", cfg_json(config(profile(percentageOfNodesToScore=TOKEN)),
                                                                    token), needles=("percentageOfNodesToScore",)))
    weight = config(profile(plugins=plugins({"name": "NodeResourcesFit", "weight": TOKEN}, point="score")))
    # kube does not reject a negative weight (scorer warns); everything else here is invalid.
    cases.append(config_case("weight-negative", cfg_raw(weight, "-1"), ZERO_TO_TWO, needles=("weight",), warn=True))
    for wid, token in (("string", "'2'"), ("fraction", "1.5"), ("true", "true"),
                       ("2-pow-31", str(2**31)), ("2-pow-63", str(2**63)), ("400-digits", BIG_400),
                       ("1e400", "1.0e+400"), ("yaml-nan", ".nan")):
        cases.append(config_case(f"weight-{wid}", cfg_raw(weight, token), needles=("weight",)))
    cases.append(config_case("weight-zero", cfg_raw(weight, "0"), ZERO_TO_TWO, needles=("weight",),
                             check=out_has("NodeResourcesFit")))
    cases.append(config_case("weight-json-nan", cfg_json(weight, "NaN"), needles=("weight",)))
    # The same, as simulate sees them.
    for cid, content in (("unknown-plugin", config(profile(plugins=plugins({"name": "NoSuchPlugin"})))),
                         ("percentage-1e400", cfg_raw(config(percentageOfNodesToScore=TOKEN), "1.0e+400")),
                         ("json-nan-weight", cfg_json(weight, "NaN")),
                         ("empty-profiles-ok", {**CONFIG_HEAD, "profiles": []})):
        codes = ZERO_TO_TWO if cid.endswith("-ok") else frozenset({2})
        check = placed({"default/p": "n1"}) if 0 in codes else None
        cases.append(config_case(cid, content, codes, simulate=True, check=check))
    # Contrib plugins' args (each plugin's own validation, and the shared source and policy args).
    la, nt = "LoadAware", "NetworkTraffic"
    for cid, plugin, args, needle in (
        ("loadaware-target-nan-json", la, {"targetUtilization": TOKEN, "address": "http://127.0.0.1:9"}, "NaN"),
        ("loadaware-factor-nan-json", la, {"estimator": {"cpuScalingFactor": TOKEN}, "address": "http://127.0.0.1:9"},
         "NaN"),
        ("loadaware-factor-near-max-json", la, {"estimator": {"cpuScalingFactor": TOKEN},
                                                "address": "http://127.0.0.1:9"}, "1.7e308"),
        ("loadaware-threshold-infinity-json", la, {"usageThresholds": {"cpu": TOKEN},
                                                   "address": "http://127.0.0.1:9"}, "Infinity"),
    ):
        cases.append(config_case(cid, cfg_json(contrib_config(plugin, args), needle), needles=("args",),
                                 contrib=True))
    for cid, plugin, args, needle, codes, warn in (
        ("loadaware-query-unknown-placeholder", la, {"cpuQuery": "avg by ({by}) (x{{nope}})",
                                                     "address": "http://127.0.0.1:9"}, "cpuQuery", None, False),
        ("loadaware-query-unbalanced-brace", la, {"cpuQuery": "avg by ({by) (x)", "address": "http://127.0.0.1:9"},
         "cpuQuery", None, False),
        ("networktraffic-query-unknown-placeholder", nt, {"query": "rate(x{{nope}}[{range}])",
                                                          "address": "http://127.0.0.1:9"}, "query", None, False),
        ("networktraffic-query-unbalanced", nt, {"query": "rate(x[{range])", "address": "http://127.0.0.1:9"},
         "query", None, False),
        ("settle-time-longer-than-ttl", la, {"address": "http://127.0.0.1:9", "policy": {"inFlight": {
            "settleTime": "10m", "ttl": "5m"}}}, "settleTime", ZERO_TO_TWO, True),
        ("ca-file-missing", nt, {"address": "https://127.0.0.1:9", "source": {"caFile": "/no/such/ca.pem"}},
         "caFile", None, False),
        ("bearer-token-file-missing", nt, {"address": "https://127.0.0.1:9",
                                           "source": {"bearerTokenFile": "/no/such/token"}}, "bearerTokenFile",
         None, False),
        ("address-not-a-url", la, {"address": "not a url"}, "address", None, False),
        ("address-integer", la, {"address": 9090}, "address", None, False),
        ("address-broken-ipv6", nt, {"address": "http://[::1:9090"}, "address", None, False),
        ("refresh-negative", la, {"address": "http://127.0.0.1:9", "source": {"refreshInterval": "-5s"}},
         "refreshInterval", None, False),
        ("refresh-zero", la, {"address": "http://127.0.0.1:9", "source": {"refreshInterval": "0s"}},
         "refreshInterval", None, False),
        ("refresh-forever", la, {"address": "http://127.0.0.1:9", "source": {"refreshInterval": "forever"}},
         "refreshInterval", None, False),
        ("max-age-huge", la, {"address": "http://127.0.0.1:9", "policy": {"maxAge": "9" * 400 + "h"}}, "maxAge",
         None, False),
        ("threshold-101", la, {"address": "http://127.0.0.1:9", "usageThresholds": {"cpu": 101}}, "usageThresholds",
         None, False),
        ("loadaware-unknown-arg", la, {"address": "http://127.0.0.1:9", "bogus": 1}, "bogus", None, False),
        ("on-missing-unknown", la, {"address": "http://127.0.0.1:9", "policy": {"onMissing": "panic"}}, "onMissing",
         None, False),
    ):
        cases.append(config_case(cid, contrib_config(plugin, args), codes or frozenset({2}), needles=(needle,),
                                 warn=warn, contrib=True, check=(lambda r: None) if codes else None))
    return cases


def usage_cases() -> list[Case]:
    cluster = {"F": VALID["cluster"]}
    return [
        Case("usage-no-arguments", [], needles=("COMMAND",)),
        Case("usage-unknown-command", ["schedule"], needles=("schedule",)),
        Case("usage-output-xml", ["simulate", "--output", "xml"], needles=("xml",)),
        Case("usage-seed-text", ["simulate", "--seed", "abc"], needles=("seed",)),
        Case("usage-seed-float", ["simulate", "--seed", "1e400"], needles=("seed",)),
        Case("usage-seed-negative", ["simulate", "--cluster", "{F}", "--seed", "-1", "--output", "json"], cluster,
             ZERO_TO_TWO, needles=("seed",), check=placed({"default/p": "n1"})),
        Case("usage-seed-2-pow-200", ["simulate", "--cluster", "{F}", "--seed", str(2**200), "--output", "json"],
             cluster, ZERO_TO_TWO, needles=("seed",), check=placed({"default/p": "n1"})),
        Case("usage-explain-without-pod", ["explain", "--cluster", "{F}"], cluster, needles=("--pod",)),
        Case("usage-validate-without-file", ["config", "validate"], needles=("file",)),
        Case("usage-config-without-subcommand", ["config"], needles=("SUBCOMMAND",)),
        Case("usage-block-plugin-empty", ["simulate", "--cluster", "{F}", "--block-plugin", "", "--output", "json"],
             cluster, frozenset({0}), check=placed({"default/p": "n1"})),
        Case("usage-cluster-empty-string", ["simulate", "--cluster", ""], needles=("error",)),
        Case("usage-metrics-empty-string", ["simulate", "--metrics", "", "--output", "json"], {}, ZERO_TO_TWO,
             needles=("metrics",), check=lambda r: None),
    ]


ALL_CASES = file_cases() + cluster_cases() + snapshot_cases() + config_cases() + usage_cases()


# --- running -------------------------------------------------------------------------------------------


class _Hang(BaseException):
    """Raised by the timer in an in-process case (not an Exception: the CLI must not catch it)."""


def run_in_process(argv: list[str]) -> Result:
    out, err = io.StringIO(), io.StringIO()

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Hang()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, IN_PROCESS_TIMEOUT)
    code: int | str
    try:
        with warnings.catch_warnings(record=True) as caught, redirect_stdout(out), redirect_stderr(err):
            warnings.simplefilter("always")
            try:
                code = main(argv)
            except _Hang:
                code = f"timeout after {IN_PROCESS_TIMEOUT}s"
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # escaped main: a failure, but keep pytest alive
                code = f"escaped {type(exc).__name__}"
                err.write(traceback.format_exc())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    runtime = [f"{w.category.__name__}: {w.message}" for w in caught if issubclass(w.category, RuntimeWarning)]
    return Result(code, out.getvalue(), err.getvalue(), runtime)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_subprocess(argv: list[str], tmp_path: Path, autoload: bool) -> Result:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "PYTHONWARNINGS": "always::RuntimeWarning"}
    env.pop("SCORER_DEBUG", None)
    env.pop("SCORER_NUMERIC_THREADS", None)
    if not autoload:
        env["SCORER_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    out_path, err_path = tmp_path / "stdout", tmp_path / "stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "scorer", *argv], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, env=env, preexec_fn=_limit_memory)
        try:
            returncode: int | str = proc.wait(timeout=SUBPROCESS_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            returncode = f"timeout after {SUBPROCESS_TIMEOUT}s"
    if isinstance(returncode, int) and returncode < 0:
        returncode = f"killed by signal {signal.Signals(-returncode).name}"
    texts = []
    for path in (out_path, err_path):
        with open(path, "rb") as f:
            texts.append(f.read(OUTPUT_READ_LIMIT).decode("utf-8", "backslashreplace"))
    runtime = [line for line in texts[1].splitlines() if "RuntimeWarning" in line]
    return Result(returncode, texts[0], texts[1], runtime)


def materialize(case: Case, tmp_path: Path) -> list[str]:
    """Write the case's files; the argv with paths filled in."""
    paths = {}
    for key, made in case.files.items():
        content = made() if callable(made) else made
        suffix = ".json" if isinstance(content, str) and content.lstrip()[:1] in ("{", "[") else ".yaml"
        path = tmp_path / f"{case.id[:80]}-{key}{suffix}"
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
        paths[key] = str(path)
    argv = []
    for arg in case.argv:
        arg = arg.replace("{TMP}", str(tmp_path))
        for key, path in paths.items():
            arg = arg.replace("{" + key + "}", path)
        argv.append(arg)
    if case.special == "fifo":
        os.mkfifo(tmp_path / "fifo.yaml")
    elif case.special == "sparse":
        with open(tmp_path / "huge.yaml", "wb") as f:
            f.truncate(4 * 2**30)
    elif case.special == "unreadable":
        if os.geteuid() == 0:
            pytest.skip("root reads any file")
        path = tmp_path / "unreadable.yaml"
        path.write_text(VALID["cluster"])
        path.chmod(0)
    return argv


@pytest.fixture(autouse=True)
def _no_autoload(monkeypatch):
    monkeypatch.setenv("SCORER_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("SCORER_DEBUG", raising=False)


def _needles(case: Case, tmp_path: Path, argv: list[str]) -> list[tuple[str, ...]]:
    """Each entry: alternatives, one of which must appear."""
    file_name = next((Path(a).name for a in argv if Path(a).name.startswith(case.id[:80] + "-F")), "")
    needles = case.needles if case.needles is not None else (("{FILE}",) if file_name else ())
    out = []
    for needle in needles:
        alternatives = needle if isinstance(needle, tuple) else (needle,)
        out.append(tuple(n.replace("{TMP}", str(tmp_path)).replace("{FILE}", file_name) for n in alternatives))
    return out


def _names(line: str, needles: list[tuple[str, ...]]) -> bool:
    return all(any(n in line for n in alternatives) for alternatives in needles)


@pytest.mark.parametrize("case", [c.param() for c in ALL_CASES])
def test_hostile_input(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if case.contrib:
        pytest.importorskip("scorer_loadaware", reason="contrib plugins not installed")
        pytest.importorskip("scorer_networktraffic", reason="contrib plugins not installed")
        monkeypatch.delenv("SCORER_DISABLE_PLUGIN_AUTOLOAD")
    argv = materialize(case, tmp_path)
    result = run_subprocess(argv, tmp_path, case.contrib) if case.isolate else run_in_process(argv)
    code, out, err = result.code, result.out, result.err
    context = f"exit {code!r}\n--- stderr ---\n{err[-3000:]}\n--- stdout ---\n{out[:1500]}"

    assert "Traceback" not in err and "Exception ignored" not in err, context
    assert isinstance(code, int), context
    assert code in case.codes, context
    assert not result.runtime_warnings, f"{result.runtime_warnings}\n{context}"
    lines = err.splitlines()
    stray = [line for line in lines if not line.startswith(STDERR_PREFIXES)]
    assert not stray, f"stderr lines that are not error:/warning:/note: lines: {stray[:3]}\n{context}"
    assert all(len(line) <= MAX_LINE for line in lines), f"a stderr line over {MAX_LINE} characters\n{context[:3000]}"
    assert "\x1b" not in err and "\x1b" not in out, context
    needles = _needles(case, tmp_path, argv)
    if code == 2:
        errors = [line for line in lines if line.startswith("error: ")]
        assert errors, context
        assert out == "", context
        for needle in needles:
            assert any(_names(line, [needle]) for line in errors), f"no error line names {needle}\n{context}"
    elif code == 0:
        if case.warn:  # on stderr, or in the text of config validate
            warned = [line for line in lines if line.startswith("warning: ")]
            warned += [line for line in out.splitlines() if "warning" in line]
            assert any(_names(line, needles) for line in warned), f"no warning names {needles}\n{context}"
        if case.check is not None:
            case.check(result)


# --- generated: property-based ---------------------------------------------------------------------

# Pieces spliced into valid files at random places: structure, numbers past every limit, non-finite
# values, wrong scalars, control characters, YAML tags and aliases.
SPLICES = ["[", "]", "{", "}", ": ", "- ", ", ", "\n", "\n  ", "\t", "'", '"', "&a ", "*a", "<<: *a", "!!binary ",
           "!!python/object ", "-1", "0", "1e999", ".nan", "NaN", "-Infinity", "9" * 400, "9" * 4400, "4Ei",
           "null", "true", "~", "\x00", "\x1b[2J", "\u202e", "\ufeff", "\xff", "---\n", "kind: Pod\n",
           "kind: List\nitems:\n- ", "apiVersion: v2\n", "metadata: {name: n1}\n", "nodeName: nowhere\n",
           "phase: Succeeded\n"]
GENERATED_TARGETS = {
    "cluster": (["simulate", "--cluster", "{F}", "--output", "json"], VALID["cluster"]),
    "config": (["simulate", "--cluster", "{C}", "--config", "{F}", "--output", "json"], VALID["config"]),
    "metrics": (["simulate", "--cluster", "{C}", "--metrics", "{F}", "--output", "json"], VALID["metrics"]),
}


@st.composite
def spliced(draw: st.DrawFn, valid: str) -> str:
    text = valid
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 8))
        text = text[:at] + draw(st.sampled_from(SPLICES)) * draw(st.integers(1, 3)) + text[at + cut:]
    return text


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data(), target=st.sampled_from(sorted(GENERATED_TARGETS)))
def test_generated_input_gives_a_result_or_one_line_errors(data: st.DataObject, target: str, tmp_path: Path) -> None:
    """Valid files with random pieces spliced in: exit 0 or 2, never a traceback, an internal error or a
    numpy warning; with 2, only ``error:`` lines, each naming something; bounded by the in-process timer."""
    argv, valid = GENERATED_TARGETS[target]
    text = data.draw(spliced(valid))
    files = {"F": tmp_path / f"{target}.yaml", "C": tmp_path / "cluster.yaml"}
    files["F"].write_bytes(text.encode("utf-8", "surrogatepass"))
    files["C"].write_text(VALID["cluster"])
    result = run_in_process([str(files["F"]) if a == "{F}" else str(files["C"]) if a == "{C}" else a for a in argv])
    context = f"input {text!r}\nexit {result.code!r}\n--- stderr ---\n{result.err[-2000:]}"
    assert result.code in (0, 2), context
    assert "Traceback" not in result.err and "internal error" not in result.err, context
    assert not result.runtime_warnings, context
    lines = result.err.splitlines()
    assert all(line.startswith(STDERR_PREFIXES) and len(line) <= MAX_LINE for line in lines), context
    if result.code == 2:
        assert result.out == "" and any(line.startswith("error: ") for line in lines), context
    else:
        json.loads(result.out)
