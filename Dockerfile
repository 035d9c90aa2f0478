# The agent's image, as the Helm chart (helm/ragdrift) runs it:
#   docker build -t REGISTRY/ragdrift:0.1.0 .
#   docker run --rm REGISTRY/ragdrift:0.1.0 --help
# Built from this repository's own package; no `demo` extra (no embedded
# broker). The user is the fixed non-root UID 10001 the chart's
# securityContext names.

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY agent ./agent
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /wheels
# crc32c is a dependency; without it kafka-python checks CRCs in pure Python,
# ~20x slower (docs/operations.md): the build fails rather than ship that.
RUN pip install --no-cache-dir /wheels/ragdrift_agent-*.whl crc32c \
 && rm -rf /wheels \
 && python -c "from agent.io.broker import has_fast_crc; assert has_fast_crc(), 'crc32c missing'"
RUN groupadd --system --gid 10001 ragdrift \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/ragdrift --shell /usr/sbin/nologin ragdrift \
 && mkdir -p /var/lib/ragdrift /etc/ragdrift \
 && chown 10001:10001 /var/lib/ragdrift
# The SQLite store and judgment batches default to the working directory.
WORKDIR /var/lib/ragdrift
USER 10001:10001
EXPOSE 9108
ENTRYPOINT ["ragdrift"]
CMD ["run", "--config", "/etc/ragdrift/ragdrift.yaml"]
