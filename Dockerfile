# The operator image: a venv with deltakeeper and its dependencies only, run as a non-root user.
# scripts/image/build.sh operator builds it; by hand:
#   pip download --only-binary=:all: --require-hashes -r requirements/operator.lock -d dist/wheels
#   pip wheel --no-deps --wheel-dir dist/wheels . pip && docker build -t deltakeeper .
# The build installs only from the wheels in dist/wheels: no network, no compiler.
ARG BASE=python:3.11.14-slim-bookworm

FROM ${BASE} AS build
COPY dist/wheels/ requirements/operator.lock /wheels/
# pip runs from its own wheel, so the venv gets no pip and the image no pip cache.
# The dependencies are exactly the lock file's, each wheel checked against its hash; then
# deltakeeper itself and, when it was staged (built where Rust is), the native stats parser.
# pip check fails the build if the lock left out a requirement of what was installed.
RUN python3 -m venv --without-pip /opt/venv \
    && set -- /wheels/pip-*.whl \
    && native="$(find /wheels -name 'deltakeeper_native-*.whl')" \
    && /opt/venv/bin/python "$1/pip" install --no-cache-dir --no-index --find-links /wheels \
        --require-hashes -r /wheels/operator.lock \
    && /opt/venv/bin/python "$1/pip" install --no-cache-dir --no-index --find-links /wheels \
        --no-deps deltakeeper ${native:+"$native"} \
    && /opt/venv/bin/python "$1/pip" check

FROM ${BASE}
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE=https://github.com/deltakeeper/deltakeeper
LABEL org.opencontainers.image.title="deltakeeper" \
      org.opencontainers.image.description="Kubernetes operator that keeps Delta Lake tables healthy: checkpoints, log cleanup, vacuum, metrics" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0"
# kopf names its peer after the login (getpass.getuser()), which needs a passwd entry.
RUN groupadd --gid 10001 deltakeeper \
    && useradd --no-log-init --uid 10001 --gid 10001 --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin deltakeeper
COPY --from=build /opt/venv /opt/venv
# The chart mounts the root file system read-only: no bytecode writes at run time.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
EXPOSE 9108
ENTRYPOINT ["deltakeeper"]
CMD ["operator"]
