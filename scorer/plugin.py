"""The plugin API: everything a filter, score or metric plugin imports from scorer, in one module.

A plugin distribution imports only this module (and, in its tests,
``scorer.testing``); every other module of scorer is internal and may change
in any release. The three plugins in ``contrib_plugins/`` are written this
way (a test holds them to it)::

    from scorer.plugin import FilterVerdict, NodeBatch, hookimpl

    SCORER_PLUGIN_API = "1.0"  # the plugin API this module was built for

    @hookimpl
    def scorer_register_plugins(registry):
        registry.register(NAME, factory, args_type=MyPluginArgs, plugin_type=MyPlugin)

What it exports:

* the contract: ``hookimpl``, ``PLUGIN_API_VERSION``, ``PluginRegistry`` (what
  ``scorer_register_plugins`` registers into), ``Handle`` (what a factory gets)
  and the types of its seams: ``Binder`` (``handle.binder``, what a Bind plugin
  binds through), ``EventRecorder`` (``handle.recorder``: Events, conditions,
  preemption's writes, enqueued without I/O);
* the cycle: ``Status``, ``Code``, ``CycleState``, ``Pod``, ``Node``,
  ``NodeInfo`` (per-node methods), ``NodeBatch`` (vectorized methods),
  ``FilterVerdict``, ``PreFilterResult``, ``MIN_NODE_SCORE``/``MAX_NODE_SCORE``;
* requeueing: ``ClusterEvent`` and its resources (``NODE``, ``POD`` ...) and
  actions (``ADD``, ``UPDATE_NODE_LABEL`` ...);
* metrics: ``metric_reader`` (a plugin's reader of one metric, its source
  from the handle's hub), ``MetricReader``, ``Reading``, ``RowMemo``,
  ``source_hub``, ``SourceHub``, the reading states (``FRESH``, ``STALE``,
  ``MISSING``, ``WARMING_UP``), ``finite`` and ``FLOAT_MAX``;
* args: ``SourceArgs``, ``NodeMappingArgs``, ``DataPolicyArgs``,
  ``InFlightArgs`` and their checks for ``validate()``: ``address_errors``,
  ``policy_timing_errors``, ``template_errors``; query templates: the
  placeholders ``BY``, ``RANGE``, ``DEVICE``, ``fill_query`` (fills ``{by}``
  from the node mapping, and the plugin's own placeholders),
  ``promql_duration``; for messages and args: ``quote``, ``parse_duration``,
  ``qualified_name_errors``.

``PLUGIN_API_VERSION`` ("MAJOR.MINOR") versions this module and the hook. A
distribution says which version it was built for with ``SCORER_PLUGIN_API =
"1.0"`` in its entry point's module; scorer refuses to load one built for
another major version or a newer minor (``scorer plugins`` lists it as
failed, with the reason). One that says nothing is taken as built for 1.0.
"""

# Each name below is re-exported (``import X as X``): the plugin API is exactly these names.
from scorer.framework.catalog import PluginRegistry as PluginRegistry
from scorer.framework.cycle_state import CycleState as CycleState
from scorer.framework.events import ADD as ADD
from scorer.framework.events import ALL as ALL
from scorer.framework.events import ASSIGNED_POD as ASSIGNED_POD
from scorer.framework.events import CSI_DRIVER as CSI_DRIVER
from scorer.framework.events import CSI_NODE as CSI_NODE
from scorer.framework.events import CSI_STORAGE_CAPACITY as CSI_STORAGE_CAPACITY
from scorer.framework.events import DELETE as DELETE
from scorer.framework.events import NAMESPACE as NAMESPACE
from scorer.framework.events import NODE as NODE
from scorer.framework.events import PERSISTENT_VOLUME as PERSISTENT_VOLUME
from scorer.framework.events import PERSISTENT_VOLUME_CLAIM as PERSISTENT_VOLUME_CLAIM
from scorer.framework.events import POD as POD
from scorer.framework.events import STORAGE_CLASS as STORAGE_CLASS
from scorer.framework.events import UNSCHEDULABLE_POD as UNSCHEDULABLE_POD
from scorer.framework.events import UPDATE as UPDATE
from scorer.framework.events import UPDATE_NODE_ALLOCATABLE as UPDATE_NODE_ALLOCATABLE
from scorer.framework.events import UPDATE_NODE_ANNOTATION as UPDATE_NODE_ANNOTATION
from scorer.framework.events import UPDATE_NODE_LABEL as UPDATE_NODE_LABEL
from scorer.framework.events import UPDATE_NODE_TAINT as UPDATE_NODE_TAINT
from scorer.framework.events import UPDATE_POD_LABEL as UPDATE_POD_LABEL
from scorer.framework.events import UPDATE_POD_SCALE_DOWN as UPDATE_POD_SCALE_DOWN
from scorer.framework.events import UPDATE_POD_SCHEDULING_GATES_ELIMINATED as UPDATE_POD_SCHEDULING_GATES_ELIMINATED
from scorer.framework.events import UPDATE_POD_TOLERATION as UPDATE_POD_TOLERATION
from scorer.framework.events import WILDCARD as WILDCARD
from scorer.framework.events import ClusterEvent as ClusterEvent
from scorer.framework.runtime import Handle as Handle
from scorer.framework.seams import Binder as Binder
from scorer.framework.seams import EventRecorder as EventRecorder
from scorer.framework.status import Code as Code
from scorer.framework.status import Status as Status
from scorer.framework.types import MAX_NODE_SCORE as MAX_NODE_SCORE
from scorer.framework.types import MIN_NODE_SCORE as MIN_NODE_SCORE
from scorer.framework.types import FilterVerdict as FilterVerdict
from scorer.framework.types import NodeBatch as NodeBatch
from scorer.framework.types import PreFilterResult as PreFilterResult
from scorer.hookspecs import PLUGIN_API_VERSION as PLUGIN_API_VERSION
from scorer.hookspecs import hookimpl as hookimpl
from scorer.inputs.describe import quote as quote
from scorer.inputs.duration import parse_duration as parse_duration
from scorer.inputs.names import qualified_name_errors as qualified_name_errors
from scorer.model import Node as Node
from scorer.model import Pod as Pod
from scorer.plugins.helper.metricreader import FLOAT_MAX as FLOAT_MAX
from scorer.plugins.helper.metricreader import FRESH as FRESH
from scorer.plugins.helper.metricreader import MISSING as MISSING
from scorer.plugins.helper.metricreader import STALE as STALE
from scorer.plugins.helper.metricreader import WARMING_UP as WARMING_UP
from scorer.plugins.helper.metricreader import MetricReader as MetricReader
from scorer.plugins.helper.metricreader import Reading as Reading
from scorer.plugins.helper.metricreader import RowMemo as RowMemo
from scorer.plugins.helper.metricreader import finite as finite
from scorer.plugins.helper.metricreader import metric_reader as metric_reader
from scorer.plugins.helper.metricreader import source_hub as source_hub
from scorer.sources.args import DataPolicyArgs as DataPolicyArgs
from scorer.sources.args import InFlightArgs as InFlightArgs
from scorer.sources.args import NodeMappingArgs as NodeMappingArgs
from scorer.sources.args import SourceArgs as SourceArgs
from scorer.sources.args import address_errors as address_errors
from scorer.sources.args import policy_timing_errors as policy_timing_errors
from scorer.sources.hub import SourceHub as SourceHub
from scorer.sources.query import BY as BY
from scorer.sources.query import DEVICE as DEVICE
from scorer.sources.query import RANGE as RANGE
from scorer.sources.query import fill_query as fill_query
from scorer.sources.query import promql_duration as promql_duration
from scorer.sources.query import template_errors as template_errors
from scorer.state.nodeinfo import NodeInfo as NodeInfo
