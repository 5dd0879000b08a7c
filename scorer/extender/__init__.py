"""Extender mode: scorer's plugins serve kube-scheduler as an HTTP extender.

``scorer run --extender-profile NAME`` answers kube-scheduler's extender calls
(``POST <prefix>/filter``, ``<prefix>/prioritize``) with the Filter and Score
plugins of profile NAME; kube-scheduler keeps its own plugins and binds.

* ``wire``: the extender v1 JSON, read and written;
* ``extender``: the verbs over a profile and the scheduler's cache;
* ``http``: the verbs over request bodies (``ExtenderVerbs``), the aiohttp routes and their metrics;
* ``front``: the lean front ahead of aiohttp on the service's listener, which answers kube-scheduler's
  requests itself and hands every other request to aiohttp.
"""

from scorer.extender.extender import Extender, PluginFailure, extender_scores
from scorer.extender.http import DEFAULT_PREFIX, add_routes
from scorer.extender.wire import MAX_EXTENDER_PRIORITY, BadRequest, ExtenderArgs, read_args

__all__ = ["DEFAULT_PREFIX", "MAX_EXTENDER_PRIORITY", "BadRequest", "Extender", "ExtenderArgs", "PluginFailure",
           "add_routes", "extender_scores", "read_args"]
