"""Node labels as integer codes per table row, for vectorized label matching.

``NodeTable.label_column(key)`` builds a ``LabelColumn`` once per key and
keeps it until a node is added, updated or removed (binding pods does not
touch it). Plugins reach it through ``NodeBatch.label_column(key)``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from scorer.model import Node, NodeSelectorRequirement, parse_int64


class LabelColumn:
    """One label key over the nodes of a table, as integer codes.

    ``codes[row]`` is the code of the node's value; ``code_of`` maps each
    distinct value (None: the node lacks the label) to its code. A requirement
    is decided once per distinct value (``lookup``), then spread by indexing.
    """

    __slots__ = ("codes", "code_of", "_ints")

    def __init__(self, key: str, nodes: Iterable[Node]) -> None:
        nodes = list(nodes)
        code_of: dict[str | None, int] = {}
        self.codes = np.fromiter(
            (code_of.setdefault(node.labels.get(key), len(code_of)) for node in nodes),
            dtype=np.int64,
            count=len(nodes),
        )
        self.code_of = code_of
        self._ints: tuple[np.ndarray, np.ndarray] | None = None

    def _parsed(self) -> tuple[np.ndarray, np.ndarray]:
        """(value as int64, parses as int64) per code, for Gt and Lt."""
        if self._ints is None:
            parsed = [None if v is None else parse_int64(v) for v in self.code_of]
            valid = np.array([p is not None for p in parsed], dtype=bool)
            ints = np.array([p if p is not None else 0 for p in parsed], dtype=np.int64)
            self._ints = (ints, valid)
        return self._ints

    def equals(self, value: str, rows: np.ndarray) -> np.ndarray:
        """Bool per row of ``rows``: does the node's label equal ``value``?"""
        code = self.code_of.get(value)
        if code is None:
            return np.zeros(len(rows), dtype=bool)
        equal: np.ndarray = self.codes[rows] == code
        return equal

    def lookup(self, req: NodeSelectorRequirement) -> np.ndarray:
        """Bool per code: does a node with that value match ``req``?

        Same semantics as ``NodeSelectorRequirement.matches`` (kube's
        ``labels.Requirement``); O(len(req.values)) for In and NotIn.
        """
        op = req.operator
        lut = np.zeros(len(self.code_of), dtype=bool)
        if op in ("In", "NotIn"):
            for value in req.values:
                code = self.code_of.get(value)
                if code is not None:
                    lut[code] = True
            return lut if op == "In" else ~lut  # a missing label is "not in"
        if op in ("Exists", "DoesNotExist"):
            lut[:] = True
            missing = self.code_of.get(None)
            if missing is not None:
                lut[missing] = False
            return lut if op == "Exists" else ~lut
        if op in ("Gt", "Lt") and len(req.values) == 1:
            want = parse_int64(req.values[0])
            if want is None:
                return lut
            ints, valid = self._parsed()
            return valid & (ints > want if op == "Gt" else ints < want)
        return lut
