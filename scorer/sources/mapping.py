"""Which Kubernetes node a Prometheus series belongs to.

Series are labelled in many ways: kube-prometheus relabels to ``node``,
older charts to ``kubernetes_node``, node-exporter's ``node_uname_info`` has
``nodename``, and raw scrapes only have ``instance`` (``IP:port``). The
mapping is configurable (``nodeMapping.by``):

* ``auto`` (default): the first of ``node``, ``kubernetes_node``, ``nodename``
  whose value is a node name, else ``instance`` as below;
* ``label``: the label named by ``nodeMapping.label`` holds the node name;
* ``instance``: ``instance`` without its port is the node's name, one of its
  InternalIP / ExternalIP addresses, or its Hostname address;
* ``uname``: the query is joined with ``node_uname_info`` on ``instance``
  and the series' ``nodename`` is the node name (as the seed article does).

Queries group by the labels the mapping reads (the ``{by}`` placeholder), so
an aggregation keeps what is needed to find the node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from scorer.model import Node

MAPPING_MODES: tuple[str, ...] = ("auto", "label", "instance", "uname")
AUTO_LABELS: tuple[str, ...] = ("node", "kubernetes_node", "nodename")
_ADDRESS_TYPES = ("InternalIP", "ExternalIP", "Hostname")


def strip_port(instance: str) -> str:
    """``10.0.0.1:9100`` -> ``10.0.0.1``; ``[fd00::1]:9100`` -> ``fd00::1``; names unchanged."""
    if instance.startswith("["):
        end = instance.find("]")
        return instance[1:end] if end > 0 else instance
    if instance.count(":") == 1:
        return instance.rsplit(":", 1)[0]
    return instance


class NodeIndex:
    """Node names and the addresses that identify them, for one refresh."""

    __slots__ = ("names", "by_address")

    def __init__(self, nodes: Iterable[Node]) -> None:
        self.names: set[str] = set()
        self.by_address: dict[str, str] = {}
        for node in nodes:
            self.names.add(node.name)
            for kind, address in node.addresses:
                if kind in _ADDRESS_TYPES and address:
                    self.by_address.setdefault(address, node.name)

    def from_instance(self, instance: str) -> str | None:
        host = strip_port(instance)
        if host in self.names:
            return host
        return self.by_address.get(host)


@attrs.frozen(slots=True)
class NodeMapping:
    by: str = "auto"
    label: str = "node"

    def group_labels(self) -> str:
        """What replaces ``{by}`` in a query template."""
        if self.by == "auto":
            return ", ".join((*AUTO_LABELS, "instance"))
        if self.by == "label":
            return self.label
        return "instance"

    def wrap(self, query: str) -> str:
        """The final PromQL for ``query``: joined with node_uname_info in ``uname`` mode."""
        if self.by != "uname":
            return query
        return f"({query}) * on(instance) group_left(nodename) max by (instance, nodename) (node_uname_info)"

    def node_of(self, labels: Mapping[str, str], index: NodeIndex) -> str | None:
        if self.by == "label":
            value = labels.get(self.label, "")
            return value if value in index.names else None
        if self.by == "uname":
            value = labels.get("nodename", "")
            return value if value in index.names else None
        if self.by == "auto":
            for label in AUTO_LABELS:
                value = labels.get(label, "")
                if value in index.names:
                    return value
        instance = labels.get("instance", "")
        return index.from_instance(instance) if instance else None
