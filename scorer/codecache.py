"""A cache of the code attrs generates for each class, kept beside the bytecode: a start of ``scorer``
does not compile it again.

attrs writes the methods of each class it defines (``__init__``, ``__eq__``, ``__repr__``...) as
Python source and compiles it there and then: about 0.3 ms a class here, some 65 ms of CPU for the
200-odd classes a ``scorer run`` defines (scorer's, aiohttp's, the plugins'), the largest part of its
start that Python's bytecode cache does not remove (kube-scheduler, a compiled binary, binds its first
pod about 0.3 s after it starts).

``install()`` gives attrs' module a ``compile`` of its own (``CodeCache.compile``): a source compiled
before (the same text, file name and mode, by the same Python) is read back from the cache with
``marshal``, as Python reads a ``.pyc``; anything else is compiled, and kept for the cache file, which
is written when the process exits. One part of a source changes from process to process: the
``__hash__`` of a hashable class starts from a number attrs draws from ``hash()`` of a string, which
differs with every interpreter (hash randomization). The key leaves that number out; the cached code
gets the number of this process in its constants, where the old one stood.

The file is where Python writes bytecode, under the name of a module's bytecode file
(``scorer.codecache_slot``: pip removes it with the package, which it would not do for a file of its own
name): in this package's ``__pycache__``, or under ``sys.pycache_prefix`` (``PYTHONPYCACHEPREFIX``) when
set; and it is written only when Python writes bytecode
(not with ``PYTHONDONTWRITEBYTECODE``, as in the image, which writes it once at build time) and
where it can: a cache that cannot be read or written
costs nothing but the compiling it would have saved. Like a ``.pyc``, the file is trusted as code:
it lives in directories only the installation writes. Should attrs stop compiling through its
module's ``compile``, nothing changes but the speed.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib
import importlib.util
import marshal
import os
import re
import sys
import tempfile
from types import CodeType

#: The most sources a cache file keeps; when full, a save keeps only what this process used.
MAX_ENTRIES = 2048
SLOT_MODULE = "codecache_slot.py"  # the module whose bytecode file's name the cache takes
# The first value hashed by a generated __hash__: a number that differs with each interpreter.
_TYPE_HASH = re.compile(r"(return hash\(\(\s*)(-?\d+)(,)")


def default_path() -> str:
    """The bytecode file of ``scorer.codecache_slot``, where Python would write it."""
    return importlib.util.cache_from_source(os.path.join(os.path.dirname(os.path.abspath(__file__)), SLOT_MODULE))


class CodeCache:
    """Compiled code by source, loaded from ``path`` and saved back to it (``save``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        # key of (mode, file name, source less its type hash) -> (that type hash or None, marshalled code)
        self.entries: dict[bytes, tuple[int | None, bytes]] = {}
        self.used: set[bytes] = set()
        self.hits = self.added = 0
        with contextlib.suppress(OSError, EOFError, ValueError, TypeError), open(path, "rb") as file:
            entries = marshal.load(file)
            if isinstance(entries, dict):
                self.entries = entries

    def compile(self, source: object, filename: object, mode: str, *args: object, **kwargs: object) -> CodeType:
        """``compile(source, filename, mode)``, from the cache when it holds that source."""
        if args or kwargs or not isinstance(source, str) or not isinstance(filename, str):
            return compile(source, filename, mode, *args, **kwargs)  # type: ignore[call-overload, no-any-return]
        match = _TYPE_HASH.search(source)
        type_hash = int(match.group(2)) if match else None
        stable = source if match is None else f"{source[:match.start(2)]}TYPE_HASH{source[match.end(2):]}"
        key = hashlib.blake2b(f"{mode}\0{filename}\0{stable}".encode(), digest_size=16).digest()
        entry = self.entries.get(key)
        if entry is not None:
            with contextlib.suppress(EOFError, ValueError, TypeError):
                cached_hash, blob = entry
                code = marshal.loads(blob)
                if isinstance(code, CodeType):
                    if type_hash is not None and cached_hash is not None and cached_hash != type_hash:
                        code = _with_constant(code, cached_hash, type_hash)
                    self.hits += 1
                    self.used.add(key)
                    return code
        code = compile(source, filename, mode)
        self.entries[key] = (type_hash, marshal.dumps(code))
        self.used.add(key)
        self.added += 1
        return code

    def save(self) -> None:
        """Write the cache file if this process compiled something new and Python writes bytecode."""
        if not self.added or sys.dont_write_bytecode:
            return
        entries = self.entries
        if len(entries) > MAX_ENTRIES:
            entries = {key: blob for key, blob in entries.items() if key in self.used}
        directory = os.path.dirname(self.path)
        try:
            os.makedirs(directory, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=directory, prefix=".scorer-attrs-code-")
        except OSError:
            return
        try:
            with os.fdopen(handle, "wb") as file:
                marshal.dump(entries, file)
            os.chmod(temporary, 0o644)  # (readable by the user the image runs as, like a .pyc)
            os.replace(temporary, self.path)  # (whole or not at all, whatever runs beside)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            return
        self.added = 0


def _with_constant(code: CodeType, old: int, new: int) -> CodeType:
    """``code`` with the integer constant ``old`` replaced by ``new``, in it and in the code it holds."""
    constants = tuple(new if type(value) is int and value == old
                      else _with_constant(value, old, new) if isinstance(value, CodeType) else value
                      for value in code.co_consts)
    return code.replace(co_consts=constants)


def install(path: str | None = None) -> CodeCache | None:
    """Make attrs compile through a ``CodeCache`` of ``path`` (``default_path()``), saved at exit;
    None when attrs is not there. Call it before the modules that define attrs classes are imported."""
    try:
        make = importlib.import_module("attr._make")
    except ImportError:
        return None
    cache = CodeCache(path or default_path())
    make.compile = cache.compile  # type: ignore[attr-defined]  # found before the builtin
    atexit.register(cache.save)
    return cache
