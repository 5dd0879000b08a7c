"""scorer.codecache: attrs' generated code compiled once, read back by later processes."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from scorer import codecache
from scorer.codecache import CodeCache


@pytest.fixture(autouse=True)
def writes_bytecode(monkeypatch) -> None:
    """As Python does by default (this machine's test run sets PYTHONDONTWRITEBYTECODE)."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)


SOURCE = "def f(self):\n    return hash((12345, self.x))\n"


def run_f(code, x: int) -> int:
    namespace: dict = {}
    exec(code, namespace)
    return namespace["f"](type("O", (), {"x": x})())


def test_a_source_is_compiled_once_then_read_back(tmp_path: Path) -> None:
    path = str(tmp_path / "cache.bin")
    first = CodeCache(path)
    code = first.compile(SOURCE, "<gen A>", "exec")
    assert (first.hits, first.added) == (0, 1)
    first.save()
    second = CodeCache(path)
    again = second.compile(SOURCE, "<gen A>", "exec")
    assert (second.hits, second.added) == (1, 0)
    assert run_f(again, 7) == run_f(code, 7) == hash((12345, 7))
    second.compile(SOURCE, "<gen B>", "exec")  # another file name: another entry
    assert (second.hits, second.added) == (1, 1)


def test_the_type_hash_of_another_process_is_replaced_by_this_ones(tmp_path: Path) -> None:
    path = str(tmp_path / "cache.bin")
    first = CodeCache(path)
    first.compile(SOURCE, "<gen>", "exec")
    first.save()
    second = CodeCache(path)
    code = second.compile(SOURCE.replace("12345", "-987654321"), "<gen>", "exec")
    assert second.hits == 1  # the same entry: only the number differs
    assert run_f(code, 3) == hash((-987654321, 3))


def test_an_unreadable_cache_compiles_and_an_unwritable_one_is_left_alone(tmp_path: Path) -> None:
    broken = tmp_path / "broken.bin"
    broken.write_bytes(b"\x00not marshal")
    cache = CodeCache(str(broken))
    assert run_f(cache.compile(SOURCE, "<gen>", "exec"), 1) == hash((12345, 1))
    blocked = tmp_path / "file"
    blocked.write_text("")
    cache = CodeCache(str(blocked / "sub" / "cache.bin"))  # its directory cannot be made
    cache.compile(SOURCE, "<gen>", "exec")
    cache.save()  # no error
    assert cache.added == 1


def test_nothing_is_written_when_python_writes_no_bytecode(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    cache = CodeCache(str(tmp_path / "cache.bin"))
    cache.compile(SOURCE, "<gen>", "exec")
    cache.save()
    assert not (tmp_path / "cache.bin").exists()


def test_a_full_cache_keeps_what_the_process_used(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(codecache, "MAX_ENTRIES", 2)
    path = str(tmp_path / "cache.bin")
    cache = CodeCache(path)
    for name in ("a", "b", "c"):
        cache.compile(SOURCE, f"<gen {name}>", "exec")
    cache.save()
    assert len(marshal.loads(Path(path).read_bytes())) == 3  # (all three used by that process)
    later = CodeCache(path)
    later.compile(SOURCE, "<gen a>", "exec")
    later.compile(SOURCE, "<gen d>", "exec")
    later.save()
    kept = CodeCache(path)
    assert len(kept.entries) == 2 and os.stat(path).st_mode & 0o777 == 0o644


@pytest.mark.parametrize("hashable", [True, False])
def test_attrs_classes_made_in_a_later_process_come_from_the_cache_and_behave(tmp_path: Path, hashable) -> None:
    script = textwrap.dedent(f"""
        import json, sys
        from scorer import codecache
        cache = codecache.install(sys.argv[1])
        import attrs

        @attrs.{'frozen' if hashable else 'define'}
        class Point:
            x: int
            y: int = 0

        p = Point(1, 2)
        assert p == Point(1, 2) and p != Point(2, 1) and repr(p) == "Point(x=1, y=2)"
        if {hashable}:
            assert hash(p) == hash(Point(1, 2)) and len({{p, Point(1, 2), Point(3)}}) == 2
        print(json.dumps([cache.hits, cache.added]))
    """)
    path = str(tmp_path / "cache.bin")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    runs = [subprocess.run([sys.executable, "-c", script, path], env=env, capture_output=True, text=True,
                           timeout=60) for _ in range(2)]
    assert [run.returncode for run in runs] == [0, 0], [run.stderr for run in runs]
    first, second = (run.stdout.strip() for run in runs)
    assert first == "[0, 1]"  # compiled, then saved at exit
    assert second == "[1, 0]"  # read back, in a process with another hash seed


def test_the_cache_takes_the_name_of_a_modules_bytecode_file(monkeypatch) -> None:
    """pip removes each installed module's bytecode file with the package (and no other file it did not
    install): the cache is the bytecode file of scorer.codecache_slot, wherever Python puts bytecode."""
    import importlib.util

    import scorer.codecache_slot as slot

    assert codecache.default_path() == importlib.util.cache_from_source(slot.__file__)
    assert Path(codecache.default_path()).parent == Path(slot.__file__).parent / "__pycache__"
    monkeypatch.setattr(sys, "pycache_prefix", "/tmp/prefix")
    assert codecache.default_path().startswith("/tmp/prefix/") and codecache.default_path().endswith(
        f"codecache_slot.{sys.implementation.cache_tag}.pyc")


def test_the_slot_modules_own_bytecode_is_no_cache_and_is_replaced(tmp_path: Path) -> None:
    """pip compiles every module when it installs, this one too: that bytecode reads as an empty cache, and
    the first save replaces it."""
    import py_compile

    source = tmp_path / "slot.py"
    source.write_text('"""nothing"""\n')
    path = str(tmp_path / "slot.pyc")
    py_compile.compile(str(source), cfile=path)
    cache = CodeCache(path)
    assert cache.entries == {}
    cache.compile(SOURCE, "<gen>", "exec")
    cache.save()
    assert CodeCache(path).compile(SOURCE, "<gen>", "exec") is not None and len(CodeCache(path).entries) == 1


@pytest.mark.slow
def test_pip_uninstall_leaves_no_scorer_directory_behind(tmp_path: Path) -> None:
    """The cache written by a run of the installed command goes with `pip uninstall`: a `scorer/` directory
    left behind (no __init__.py) would be a namespace package hiding an editable install made after it."""
    from venvkit import FreshVenv

    venv = FreshVenv(tmp_path)
    venv.env.pop("PYTHONDONTWRITEBYTECODE", None)  # (a user's machine writes bytecode)
    venv.run("scorer", "plugins")
    site = Path(venv.run("python", "-c", "import scorer, os; print(os.path.dirname(scorer.__file__))").stdout.strip())
    cache = Path(venv.run("python", "-c", "from scorer import codecache; print(codecache.default_path())")
                 .stdout.strip())
    assert cache.is_file() and cache.parent.parent == site
    venv.run("python", "-m", "pip", "uninstall", "--yes", "--quiet", "scorer")
    assert not site.exists(), sorted(str(p) for p in site.rglob("*"))
