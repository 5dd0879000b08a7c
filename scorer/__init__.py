"""scorer: a Kubernetes scheduler in Python with kube-scheduler's framework."""

__version__ = "0.1.0"
