# The agent's image, as the Helm chart (helm/ragdrift) runs it:
#   docker build -t REGISTRY/ragdrift:0.2.0 .
#   docker run --rm REGISTRY/ragdrift:0.2.0 --help
# Built from this repository's own package with the `confluent` extra (either
# Kafka client library, as kafka.library chooses); no `demo` extra (no embedded
# broker). The user is the fixed non-root UID 10001 the chart's
# securityContext names. tests/test_image.py builds and runs it.

# Debian bookworm's Python 3.11, pinned to the release so a rebuild gets the
# same system libraries.
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY constraints/agent.txt ./constraints/agent.txt
COPY agent ./agent
# The agent lives in its own virtual environment: a system Python may be
# externally managed (PEP 668), and the final stage copies one directory.
# crc32c is a dependency; without it kafka-python checks CRCs in pure Python,
# ~20x slower (docs/operations.md): the build fails rather than ship that.
# Every package at the version CI tested (constraints/agent.txt). pip leaves the
# environment once it has installed the agent.
RUN python3 -m venv /opt/ragdrift \
 && /opt/ragdrift/bin/pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
 && /opt/ragdrift/bin/pip install --no-cache-dir -c constraints/agent.txt "$(ls /wheels/ragdrift_agent-*.whl)[confluent]" crc32c \
 && /opt/ragdrift/bin/python -c "from agent.io.kafka.broker import has_fast_crc; assert has_fast_crc(), 'crc32c missing'" \
 && /opt/ragdrift/bin/python -c "import confluent_kafka" \
 && /opt/ragdrift/bin/pip uninstall --yes --quiet pip

FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/ragdrift/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
COPY --from=build /opt/ragdrift /opt/ragdrift
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
