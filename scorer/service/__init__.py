"""``scorer run``: the scheduler service (reference §6, §8; DESIGN.md "Kubernetes API layer").

* ``options``: the command line of ``scorer run``.
* ``logs``: one line per log event, as text or JSON.
* ``supervisor``: named background tasks; a crash is logged with the name and restarted or fatal.
* ``health``: ``/healthz``, ``/livez``, ``/readyz`` checks with kube's verbose format.
* ``app``: the aiohttp application: one cleanup context per long-lived part (API session,
  cluster source, metric sources, leader elector, scheduling loop), ``/metrics`` and the probes.
* ``run``: signals, the HTTP listener, the bounded shutdown and the exit status.
"""
