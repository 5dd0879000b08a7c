"""Node selectors evaluated over a batch of nodes, vectorized on the table's label columns.

kube's ``NodeSelector`` semantics: terms OR-ed, a term's requirements AND-ed; a term with no
requirement, or one kube cannot parse (``NodeSelectorTerm.parse_error``), matches no node;
``matchFields`` knows only ``metadata.name``. NodeAffinity (the pod's required and preferred
terms) and VolumeBinding (a PersistentVolume's node affinity) read selectors through here.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from scorer.framework.types import NodeBatch
from scorer.model import LabelSelector, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm

NODE_NAME_FIELD = "metadata.name"


def requirement_mask(req: NodeSelectorRequirement, nodes: NodeBatch, *, field: bool = False) -> np.ndarray:
    """Bool per batch node: ``req`` holds (``field``: a ``matchFields`` requirement on the node name)."""
    if field:  # matchFields: metadata.name In/NotIn the names
        hit = nodes.named(req.values)
        return hit if req.operator == "In" else ~hit
    column = nodes.label_column(req.key)
    matches: np.ndarray = column.lookup(req)[column.codes[nodes.rows]]
    return matches


def term_mask(term: NodeSelectorTerm, nodes: NodeBatch) -> np.ndarray:
    """Bool per batch node: every requirement of ``term`` holds."""
    if term.parse_error is not None or (not term.match_expressions and not term.match_fields):
        # an empty term, or one kube cannot parse (an invalid label value), matches no node
        return np.zeros(len(nodes), dtype=bool)
    match = np.ones(len(nodes), dtype=bool)
    for req in term.match_expressions:
        match &= requirement_mask(req, nodes)
    for req in term.match_fields:
        if req.key != NODE_NAME_FIELD:
            return np.zeros(len(nodes), dtype=bool)
        match &= requirement_mask(req, nodes, field=True)
    return match


def selector_mask(selector: NodeSelector, nodes: NodeBatch) -> np.ndarray:
    """Bool per batch node: some term of ``selector`` matches."""
    match = np.zeros(len(nodes), dtype=bool)
    for term in selector.terms:
        match |= term_mask(term, nodes)
    return match


def labels_mask(labels: Mapping[str, str], nodes: NodeBatch) -> np.ndarray:
    """Bool per batch node: it has every label with that value (kube's ``labels.SelectorFromSet``)."""
    match = np.ones(len(nodes), dtype=bool)
    for key, value in labels.items():
        match &= requirement_mask(NodeSelectorRequirement(key=key, operator="In", values=(value,)), nodes)
    return match


def label_selector_mask(selector: LabelSelector, nodes: NodeBatch) -> np.ndarray:
    """Bool per batch node: its labels match ``selector`` (a CSIStorageCapacity's node topology)."""
    match = labels_mask(selector.match_labels, nodes)
    for req in selector.match_expressions:
        match &= requirement_mask(NodeSelectorRequirement(key=req.key, operator=req.operator, values=req.values),
                                  nodes)
    return match
