"""The nominator: the pods that preemption nominated to a node, kept current by the queue.

``SchedulingQueue.nominator`` is the one instance; the framework reads it
(``Framework.run_filters``' nominated pass) through its handle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scorer.model import Pod


class Nominator:
    """Pods nominated to run on a node, by node (kube's PodNominator, ``nominatedPodMap``).

    A pod gets a nominated node when preemption chose that node for it
    (``add(pod, node)``, recorded by the scheduling cycle at once, before the
    API write of ``status.nominatedNodeName`` comes back), or when it is
    queued with ``status.nominatedNodeName`` set (``add(pod)``). The queue
    keeps it current: an update replaces the pod (keeping an in-memory
    nomination the update does not know about yet, as kube does), a delete
    or a binding removes it. Later cycles count a nominated pod on its node
    for pods of equal or lower priority (``Framework.run_filters``' nominated
    pass). Pods are keyed by UID (``ns/name`` when the UID is empty).
    """

    __slots__ = ("_by_node", "_node_of")

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, Pod]] = {}  # node -> {pod id: pod}, in nomination order
        self._node_of: dict[str, str] = {}  # pod id -> node

    def __len__(self) -> int:
        return len(self._node_of)

    def __bool__(self) -> bool:
        return bool(self._node_of)

    def add(self, pod: Pod, node_name: str = "") -> None:
        """Nominate ``pod`` to ``node_name`` (default: the pod's own ``nominated_node_name``;
        neither: the pod has no nomination afterwards)."""
        self.delete(pod)
        node = node_name or pod.nominated_node_name
        if not node:
            return
        pid = _pod_id(pod)
        self._node_of[pid] = node
        self._by_node.setdefault(node, {})[pid] = pod

    def delete(self, pod: Pod) -> None:
        """``pod`` has no nomination any more (bound, deleted, or its nomination cleared)."""
        pid = _pod_id(pod)
        node = self._node_of.pop(pid, None)
        if node is None:
            return
        pods = self._by_node[node]
        pods.pop(pid, None)
        if not pods:
            del self._by_node[node]

    def update(self, old_pod: Pod, new_pod: Pod) -> None:
        """kube's UpdateNominatedPod: the pod object is replaced; an update that carries no
        nomination (old and new without one) keeps the nomination made in memory."""
        node = ""
        if not old_pod.nominated_node_name and not new_pod.nominated_node_name:
            node = self._node_of.get(_pod_id(old_pod), "")
        self.delete(old_pod)
        self.add(new_pod, node)

    def node_of(self, pod: Pod) -> str | None:
        """The node ``pod`` is nominated to, or None."""
        return self._node_of.get(_pod_id(pod))

    def nominated_pods_for_node(self, node_name: str) -> list[Pod]:
        """The pods nominated to ``node_name``, in nomination order."""
        pods = self._by_node.get(node_name)
        return list(pods.values()) if pods else []

    def nodes(self) -> list[str]:
        """The nodes some pod is nominated to."""
        return list(self._by_node)


def _pod_id(pod: Pod) -> str:
    return pod.uid or pod.key

