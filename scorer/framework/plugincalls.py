"""How the framework calls plugin methods, and what becomes of a plugin's mistakes.

Every plugin call of ``scorer.framework.runtime.Framework`` returns through one
of the ``to_*`` converters of its extension point, which turns the result into
``(value, Status)`` and raises TypeError/ValueError, saying what was expected,
for a result the point does not accept: a score array of floats (it would be
truncated), a Filter result that is not a FilterVerdict of the batch's size, a
PostFilter or Permit tuple of the wrong shape. An exception, raised by the
plugin or by a converter, becomes ``plugin_failed``'s Error status::

    running Score plugin "Tier" (scorer-tier 0.1.0): ValueError: no tier label

naming the point, the plugin, its distribution (left out for scorer's own
plugins) and the exception; that message is what the pod's Event, its
PodScheduled condition and ``scorer explain`` show. With ``SCORER_DEBUG=1``
the traceback is logged too (logger ``scorer.framework.plugincalls``).

``filter_call`` and ``score_call`` present per-node Filter and Score plugins
as one vectorized call over a batch of nodes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from scorer.errors import debug_enabled
from scorer.framework.cycle_state import CycleState
from scorer.framework.interface import (
    BatchFilterPlugin,
    BatchScorePlugin,
    FilterPlugin,
    ScorePlugin,
)
from scorer.framework.status import SUCCESS, Status
from scorer.framework.types import FilterVerdict, NodeBatch, PreFilterResult
from scorer.model import Pod

logger = logging.getLogger(__name__)

T = TypeVar("T")

# A plugin method's result -> (value, status); raises TypeError/ValueError for a result
# its extension point does not accept. Called with the plugin name and the call's args.
Convert = Callable[[Any, str, tuple[Any, ...]], tuple[T, Status]]


def plugin_failed(point: str, plugin: str, origin: str, exc: BaseException) -> Status:
    """The Error status of a plugin call that raised, or returned what ``point`` does not accept.

    ``origin`` is the plugin's distribution and version ("" for scorer's own plugins).
    With ``SCORER_DEBUG`` set, the traceback is logged.
    """
    where = f" ({origin})" if origin else ""
    message = f'running {point} plugin "{plugin}"{where}: {type(exc).__name__}: {exc}'
    if debug_enabled():
        logger.error("%s", message, exc_info=exc)
    return Status.error(message, plugin)


def _describe(result: Any) -> str:
    """A short description of a returned value, for the messages below."""
    if isinstance(result, np.ndarray):
        return f"an array of {result.dtype}"
    text = repr(result)
    return f"{type(result).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def to_status(result: Any, plugin: str, args: tuple[Any, ...]) -> tuple[None, Status]:
    if result is None:
        return None, SUCCESS
    if isinstance(result, Status):
        return None, result.with_plugin(plugin)
    raise TypeError(f"returned {_describe(result)}, expected a Status or None")


def to_pre_filter(result: Any, plugin: str, args: tuple[Any, ...]) -> tuple[frozenset[str] | None, Status]:
    if isinstance(result, PreFilterResult):
        return result.node_names, result.status.with_plugin(plugin)
    return to_status(result, plugin, args)


def to_verdict(result: Any, plugin: str, args: tuple[Any, ...]) -> tuple[FilterVerdict | None, Status]:
    """A verdict over the batch (``args[2]``); one that rejects a node with Error fails the call."""
    if result is None:
        return None, SUCCESS
    size = len(args[2])
    if not isinstance(result, FilterVerdict) or result.size != size:
        raise TypeError(f"returned {result!r}, expected a FilterVerdict of {size} nodes")
    error = result.first_error(plugin)
    return result, error if error is not None else SUCCESS


def to_post_filter(result: Any, plugin: str, args: tuple[Any, ...]) -> tuple[str | None, Status]:
    if not isinstance(result, tuple):
        return None, to_status(result, plugin, args)[1]
    if len(result) != 2 or not (result[0] is None or isinstance(result[0], str)):
        raise TypeError(f"returned {_describe(result)}, expected (nominated node name or None, Status)")
    return result[0], to_status(result[1], plugin, args)[1]


_INT64 = np.dtype(np.int64)


def _int64_vector(result: Any) -> np.ndarray:
    """``result`` as a 1-D int64 array; an int64 array is taken as is. Scores that are not integers
    (floats would be truncated, None or objects are mistakes) raise TypeError."""
    if type(result) is np.ndarray and result.dtype is _INT64 and result.ndim == 1:
        return result
    try:
        array = np.asarray(result)
    except (TypeError, ValueError, OverflowError) as exc:
        raise TypeError(f"returned {_describe(result)} ({exc}), expected integer scores") from None
    if array.dtype.kind not in "iu":
        raise TypeError(f"returned {_describe(array if isinstance(result, np.ndarray) else result)}, expected "
                        "integer scores, one per node (an int64 array: round floats with "
                        "np.rint(scores).astype(np.int64))")
    if array.dtype.kind == "u" and array.size and array.max() > np.iinfo(np.int64).max:
        raise ValueError(f"returned a score of {array.max()}, beyond int64")
    return array.astype(np.int64, copy=False).reshape(-1)


def to_scores(result: Any, plugin: str, args: tuple[Any, ...]) -> tuple[np.ndarray, Status]:
    scores = _int64_vector(result)
    size = len(args[2])
    if len(scores) != size:
        raise ValueError(f"returned {len(scores)} scores for {size} nodes")
    return scores, SUCCESS


def to_normalized(result: Any, plugin: str, args: tuple[Any, ...]) -> tuple[np.ndarray, Status]:
    """NormalizeScore returns the new scores, or None after changing them in place (``args[2]``)."""
    if result is None:
        return args[2], SUCCESS
    return _int64_vector(result), SUCCESS


def to_permit(result: Any, plugin: str, args: tuple[Any, ...]) -> tuple[float, Status]:
    timeout: Any = 0.0
    if isinstance(result, tuple):
        if len(result) != 2 or isinstance(result[1], bool) or not isinstance(result[1], (int, float)):
            raise TypeError(f"returned {_describe(result)}, expected a Status, or (Status, timeout in seconds)")
        result, timeout = result
    return float(timeout), to_status(result, plugin, args)[1]


def filter_call(plugin: FilterPlugin) -> Callable[[CycleState, Pod, NodeBatch], FilterVerdict | None]:
    """The plugin's Filter as one call over a batch: ``filter_batch``, or ``filter`` per node."""
    if isinstance(plugin, BatchFilterPlugin):
        return plugin.filter_batch
    node_filter = plugin

    def filter_nodes(state: CycleState, pod: Pod, batch: NodeBatch) -> FilterVerdict:
        verdict = FilterVerdict(len(batch))
        for i, info in enumerate(batch.node_infos()):
            _, status = to_status(node_filter.filter(state, pod, info), plugin.name, ())
            if not status.is_success() and not status.is_skip():
                verdict.reject_one(i, status)
        return verdict

    return filter_nodes


def score_call(plugin: ScorePlugin) -> Callable[[CycleState, Pod, NodeBatch], Any]:
    """The plugin's Score as one call over a batch: ``score_batch``, or ``score`` per node."""
    if isinstance(plugin, BatchScorePlugin):
        return plugin.score_batch
    node_score = plugin

    def score_nodes(state: CycleState, pod: Pod, batch: NodeBatch) -> np.ndarray:
        scores = np.zeros(len(batch), dtype=np.int64)
        for i, info in enumerate(batch.node_infos()):
            result = node_score.score(state, pod, info)
            value, status = result if isinstance(result, tuple) else (result, None)
            if status is not None and not status.is_success():
                raise ValueError(f'node "{info.name}": {status.code.label}: {status.message()}')
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f'returned {value!r} for node "{info.name}", expected an int')
            scores[i] = int(value)
        return scores

    return score_nodes
