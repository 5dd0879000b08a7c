"""Status codes returned by plugins, and how the scheduler reacts to each."""

from __future__ import annotations

import enum
import functools

import attrs


class Code(enum.IntEnum):
    """kube-scheduler's status codes.

    SUCCESS: the plugin ran and accepts.
    ERROR: an internal error; the pod is requeued with backoff and gets a
        ``SchedulerError`` condition.
    UNSCHEDULABLE: the node (or pod) is rejected for now; preemption or a
        cluster event may help. The pod goes to the unschedulable pool.
    UNSCHEDULABLE_AND_UNRESOLVABLE: rejected, and preemption cannot help.
    WAIT: a Permit plugin holds the pod.
    SKIP: PreFilter/PreScore say the plugin has nothing to do for this pod;
        its Filter/Score is then not called. In Bind: try the next binder.
    PENDING: the pod waits for something outside the scheduler.
    """

    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6

    @property
    def label(self) -> str:
        """The name kube-scheduler prints (``UnschedulableAndUnresolvable``)."""
        return _LABELS[self]


_LABELS = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}

_REJECTED = frozenset({Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING})


def _reasons(value: object) -> tuple[str, ...]:
    """A Status's reasons as a tuple of strings: one string is one reason (``Status(Code.UNSCHEDULABLE,
    "no tier label")``), never split into characters; anything but strings is a TypeError."""
    if type(value) is tuple:
        for reason in value:
            if type(reason) is not str:
                break
        else:
            return value
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"Status reasons must be a string or a tuple of strings, got {type(value).__name__}")
    reasons = tuple(value)
    for reason in reasons:
        if not isinstance(reason, str):
            raise TypeError(f"Status reasons must be strings, got {type(reason).__name__} {reason!r}")
    return reasons


@attrs.frozen(slots=True)
class Status:
    """Result of one plugin call. ``plugin`` names the plugin that produced it.

    ``reasons`` are strings; a single string is taken as one reason.
    """

    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = attrs.field(default=(), converter=_reasons)
    plugin: str = ""

    @classmethod
    def error(cls, message: str, plugin: str = "") -> Status:
        return cls(Code.ERROR, (message,), plugin)

    @classmethod
    def unschedulable(cls, *reasons: str, plugin: str = "", resolvable: bool = True) -> Status:
        code = Code.UNSCHEDULABLE if resolvable else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return cls(code, tuple(reasons), plugin)

    @classmethod
    def skip(cls) -> Status:
        """A Skip status: the one shared ``SKIP`` (statuses are immutable; PreFilter and PreScore
        plugins return it in most cycles)."""
        return SKIP if cls is Status else cls(Code.SKIP)

    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    def is_skip(self) -> bool:
        return self.code == Code.SKIP

    def is_rejected(self) -> bool:
        """Unschedulable, UnschedulableAndUnresolvable or Pending."""
        return self.code in _REJECTED

    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        """This status from ``plugin``: itself when it names it already. A plain Status is built
        directly (``attrs.evolve`` costs three times as much), and one without reasons (the Success
        and Skip of plugin calls) is one shared instance per code and plugin; a subclass, which may
        have fields of its own, is evolved."""
        if self.plugin == plugin:
            return self
        if type(self) is not Status:
            return attrs.evolve(self, plugin=plugin)
        if not self.reasons:
            return _bare(self.code, plugin)
        return Status(self.code, self.reasons, plugin)


@functools.lru_cache(maxsize=1024, typed=True)  # codes times the configured plugin names: a few hundred at most
def _bare(code: Code, plugin: str) -> Status:
    """The status of ``code`` from ``plugin`` with no reasons."""
    return Status(code, (), plugin)


SUCCESS = Status()
SKIP = Status(Code.SKIP)
