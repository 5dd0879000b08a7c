# syntax=docker/dockerfile:1
# scorer's image: `docker build -t scorer:0.1.0 .` at the top of a checkout (k8s/deployment.yaml runs it).
#
# The builder stage makes wheels of scorer, of the contrib plugins the shipped configuration enables
# (k8s/configmap.yaml: LoadAware, NetworkTraffic) and of every dependency; the final stage installs them
# from that directory only (no index), on a slim Python without compilers, and runs as a non-root user.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml setup.cfg README.md ./
COPY scorer/ scorer/
COPY contrib_plugins/loadaware/ contrib_plugins/loadaware/
COPY contrib_plugins/networktraffic/ contrib_plugins/networktraffic/
RUN pip wheel --wheel-dir /wheels . ./contrib_plugins/loadaware ./contrib_plugins/networktraffic

FROM ${PYTHON_IMAGE}
# PYTHONMALLOC=malloc: small objects from glibc's malloc, not Python's arenas, so that what pod churn
# allocated goes back to the system once the pods are gone (README, "Faults": after 3 minutes of churn at
# 365 pods/s, RSS 117 MB above idle with the default allocator, 10 MB with this one).
# One thread for numpy's BLAS and OpenMP (README, "Threads"): scorer makes no call that uses more, and their
# default, one thread per core of the node, only spins. The `scorer` command sets the three libraries'
# variables to SCORER_NUMERIC_THREADS whatever they say; they are set here too for any other Python program
# run in the image.
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    PYTHONMALLOC=malloc SCORER_NUMERIC_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# The numeric uid/gid the Deployment's securityContext runs as (runAsUser: 10001).
RUN groupadd --system --gid 10001 scorer \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin scorer
# The wheels are bind-mounted, not copied: they stay out of the image's layers. One `scorer plugins`
# writes the cache of attrs' generated code beside scorer's bytecode (README, "Start-up"); the image
# writes no bytecode at run time. pip, setuptools and wheel go once scorer is installed: nothing builds
# or installs packages at run time.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels scorer scorer-loadaware scorer-networktraffic \
 && PYTHONDONTWRITEBYTECODE= scorer plugins >/dev/null \
 && pip uninstall --yes pip setuptools wheel
USER 10001:10001
EXPOSE 10259
ENTRYPOINT ["scorer"]
CMD ["run", "--config", "/etc/scorer/config.yaml"]
