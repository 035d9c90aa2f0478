"""librdkafka's configuration properties, by the client they apply to (librdkafka 2.12).

confluent-kafka refuses an unknown property only when a client is built, and
a consumer property given to a producer is only warned about; with these
names the configuration check refuses both at `check-config` and at start.
The names and sides are those of librdkafka's configuration reference;
tests/io/test_kafka_options.py checks each name against the installed library.
"""

from __future__ import annotations

CONSUMER_ONLY = frozenset({
    "auto.commit.enable", "auto.commit.interval.ms", "auto.offset.reset", "check.crcs",
    "consume.callback.max.messages", "coordinator.query.interval.ms", "enable.auto.commit",
    "enable.auto.offset.store", "enable.partition.eof", "fetch.error.backoff.ms", "fetch.max.bytes",
    "fetch.message.max.bytes", "fetch.min.bytes", "fetch.queue.backoff.ms", "fetch.wait.max.ms", "group.id",
    "group.instance.id", "group.protocol", "group.protocol.type", "group.remote.assignor",
    "heartbeat.interval.ms", "isolation.level", "max.partition.fetch.bytes", "max.poll.interval.ms",
    "offset.store.method", "offset.store.path", "offset.store.sync.interval.ms",
    "partition.assignment.strategy", "queued.max.messages.kbytes", "queued.min.messages", "session.timeout.ms",
})
PRODUCER_ONLY = frozenset({
    "acks", "batch.num.messages", "batch.size", "compression.codec", "compression.level", "compression.type",
    "delivery.report.only.error", "delivery.timeout.ms", "enable.gapless.guarantee", "enable.idempotence",
    "linger.ms", "message.send.max.retries", "message.timeout.ms", "partitioner", "produce.offset.report",
    "queue.buffering.backpressure.threshold", "queue.buffering.max.kbytes", "queue.buffering.max.messages",
    "queue.buffering.max.ms", "queuing.strategy", "request.required.acks", "request.timeout.ms", "retries",
    "sticky.partitioning.linger.ms", "transaction.timeout.ms", "transactional.id",
})
SHARED = frozenset({
    "allow.auto.create.topics", "api.version.fallback.ms", "api.version.request",
    "api.version.request.timeout.ms", "bootstrap.servers", "broker.address.family", "broker.address.ttl",
    "broker.version.fallback", "builtin.features", "client.dns.lookup", "client.id", "client.rack",
    "client.software.name", "client.software.version", "connections.max.idle.ms", "debug",
    "enable.metrics.push", "enable.random.seed", "enable.sasl.oauthbearer.unsecure.jwt",
    "enable.sparse.connections", "enable.ssl.certificate.verification", "enabled_events", "https.ca.location",
    "https.ca.pem", "internal.termination.signal", "log.connection.close", "log.queue", "log.thread.name",
    "log_level", "max.in.flight", "max.in.flight.requests.per.connection", "message.copy.max.bytes",
    "message.max.bytes", "metadata.broker.list", "metadata.max.age.ms",
    "metadata.recovery.rebootstrap.trigger.ms", "metadata.recovery.strategy", "metadata.request.timeout.ms",
    "plugin.library.paths", "receive.message.max.bytes", "reconnect.backoff.jitter.ms",
    "reconnect.backoff.max.ms", "reconnect.backoff.ms", "retry.backoff.max.ms", "retry.backoff.ms",
    "sasl.kerberos.keytab", "sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal", "sasl.kerberos.service.name", "sasl.mechanism", "sasl.mechanisms",
    "sasl.oauthbearer.assertion.algorithm", "sasl.oauthbearer.assertion.claim.aud",
    "sasl.oauthbearer.assertion.claim.exp.seconds", "sasl.oauthbearer.assertion.claim.iss",
    "sasl.oauthbearer.assertion.claim.jti.include", "sasl.oauthbearer.assertion.claim.nbf.seconds",
    "sasl.oauthbearer.assertion.claim.sub", "sasl.oauthbearer.assertion.file",
    "sasl.oauthbearer.assertion.jwt.template.file", "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.assertion.private.key.passphrase", "sasl.oauthbearer.assertion.private.key.pem",
    "sasl.oauthbearer.client.credentials.client.id", "sasl.oauthbearer.client.credentials.client.secret",
    "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.config",
    "sasl.oauthbearer.extensions", "sasl.oauthbearer.grant.type",
    "sasl.oauthbearer.metadata.authentication.type", "sasl.oauthbearer.method", "sasl.oauthbearer.scope",
    "sasl.oauthbearer.token.endpoint.url", "sasl.password", "sasl.username", "security.protocol",
    "socket.blocking.max.ms", "socket.connection.setup.timeout.ms", "socket.keepalive.enable",
    "socket.max.fails", "socket.nagle.disable", "socket.receive.buffer.bytes", "socket.send.buffer.bytes",
    "socket.timeout.ms", "ssl.ca.certificate.stores", "ssl.ca.location", "ssl.ca.pem",
    "ssl.certificate.location", "ssl.certificate.pem", "ssl.cipher.suites", "ssl.crl.location",
    "ssl.curves.list", "ssl.endpoint.identification.algorithm", "ssl.engine.id", "ssl.engine.location",
    "ssl.key.location", "ssl.key.password", "ssl.key.pem", "ssl.keystore.location", "ssl.keystore.password",
    "ssl.providers", "ssl.sigalgs.list", "statistics.interval.ms", "topic.blacklist",
    "topic.metadata.propagation.max.ms", "topic.metadata.refresh.fast.cnt",
    "topic.metadata.refresh.fast.interval.ms", "topic.metadata.refresh.interval.ms",
    "topic.metadata.refresh.sparse",
})
CONSUMER = CONSUMER_ONLY | SHARED
PRODUCER = PRODUCER_ONLY | SHARED
