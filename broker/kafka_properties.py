"""Kafka 4.x's broker properties that oncelog does not read under their own name, as data.

A Kafka ``server.properties`` must start oncelog unchanged, so every broker property of Kafka's configuration
reference is one of:

* a property of ``broker.config.PROPERTIES`` (read with Kafka's meaning);
* an alias in ``ALIASES``, applied to the property oncelog reads with Kafka's precedence (``log.retention.ms`` over
  ``.minutes`` over ``.hours``; ``log.dirs`` over ``log.dir``; ``broker.id`` equal to ``node.id``);
* a name of ``NOT_USED``: accepted, and listed once at start-up as not used by oncelog, with the reason of its group.

Any other name is not Kafka's and stops the start, with the closest known name as a suggestion. The names were
checked against the property constants of Kafka's broker sources at the end of the 3.x line (KafkaConfig and the
server, storage, raft, coordinator and security config classes) and its stock KRaft server.properties, plus 4.0's
``controller.quorum.bootstrap.servers``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MS_PER_MINUTE = 60_000
MS_PER_HOUR = 3_600_000


@dataclass(frozen=True)
class Alias:
    """Kafka names that set one oncelog property: the first of ``names`` present wins (Kafka's precedence), its
    integer value times its factor (any negative value meaning -1, as Kafka's retention time)."""

    target: str
    names: tuple[tuple[str, int], ...]


#: oncelog property -> the Kafka names that set it, highest precedence first (the property's own name among them).
ALIASES: tuple[Alias, ...] = (
    Alias(
        "log.retention.ms",
        (("log.retention.ms", 1), ("log.retention.minutes", MS_PER_MINUTE), ("log.retention.hours", MS_PER_HOUR)),
    ),
    Alias("log.roll.ms", (("log.roll.ms", 1), ("log.roll.hours", MS_PER_HOUR))),
    # Kafka's broker name of the topic config file.delete.delay.ms.
    Alias("file.delete.delay.ms", (("file.delete.delay.ms", 1), ("log.segment.delete.delay.ms", 1))),
)
#: Names whose value is another property's text: Kafka name -> oncelog property (the property's own name wins).
TEXT_ALIASES: Mapping[str, str] = {"log.dir": "log.dirs", "broker.id": "node.id"}


@dataclass(frozen=True)
class NotUsed:
    """Kafka broker properties oncelog accepts without using them, for one reason."""

    reason: str
    names: frozenset[str]
    #: Whole families of Kafka properties, by name prefix (used where Kafka's family is large and still growing).
    prefixes: tuple[str, ...] = ()
    #: Names of those families that oncelog does read (they are in ``broker.config.PROPERTIES``).
    read: frozenset[str] = frozenset()

    def covers(self, name: str) -> bool:
        return name in self.names or (name.startswith(self.prefixes) and name not in self.read)


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Every Kafka 4.x broker property oncelog accepts and does not use, grouped by why.
NOT_USED: tuple[NotUsed, ...] = (
    NotUsed(
        "thread pools and request queues: oncelog serves every listener from one event loop and fsyncs in one "
        "helper process",
        _names(
            """num.network.threads num.io.threads num.recovery.threads.per.data.dir background.threads
            num.replica.alter.log.dirs.threads log.cleaner.threads queued.max.requests
            group.coordinator.threads share.coordinator.threads remote.log.manager.thread.pool.size"""
        ),
    ),
    NotUsed(
        "KRaft: a single oncelog node keeps its metadata in its data dir and has no controller quorum (the "
        "listeners named in controller.listener.names are not opened)",
        _names(
            """process.roles controller.listener.names controller.quorum.voters controller.quorum.bootstrap.servers
            controller.quorum.election.timeout.ms controller.quorum.election.backoff.max.ms
            controller.quorum.fetch.timeout.ms controller.quorum.append.linger.ms controller.quorum.request.timeout.ms
            controller.quorum.retry.backoff.ms controller.quorum.auto.join.enable controller.socket.timeout.ms
            controller.performance.sample.period.ms controller.performance.always.log.threshold.ms
            metadata.log.dir metadata.log.segment.bytes metadata.log.segment.ms
            metadata.log.max.record.bytes.between.snapshots metadata.log.max.snapshot.interval.ms
            metadata.max.retention.bytes metadata.max.retention.ms metadata.max.idle.interval.ms
            initial.broker.registration.timeout.ms broker.heartbeat.interval.ms
            security.inter.broker.protocol sasl.mechanism.controller.protocol
            sasl.mechanism.inter.broker.protocol early.start.listeners eligible.leader.replicas.enable
            unstable.api.versions.enable unstable.feature.versions.enable server.max.startup.time.ms
            metadata.log.segment.min.bytes"""
        ),
    ),
    NotUsed(
        "replication: tuning and quotas oncelog's replication does not have (one fetcher per leader, no throttles)",
        _names(
            """transaction.state.log.min.isr share.coordinator.state.topic.replication.factor
            share.coordinator.state.topic.min.isr num.replica.fetchers
            replica.socket.receive.buffer.bytes replica.socket.timeout.ms replica.selector.class
            unclean.leader.election.interval.ms replication.quota.window.num
            replication.quota.window.size.seconds alter.log.dirs.replication.quota.window.num
            alter.log.dirs.replication.quota.window.size.seconds offsets.commit.timeout.ms
            controlled.shutdown.max.retries controlled.shutdown.retry.backoff.ms
            leader.replication.throttled.rate follower.replication.throttled.rate
            replica.alter.log.dirs.io.max.bytes.per.second"""
        ),
    ),
    NotUsed(
        "Java: plug-in classes, JMX metrics and the JVM's security providers (oncelog runs no Java code)",
        _names(
            """authorizer.class.name principal.builder.class create.topic.policy.class.name
            alter.config.policy.class.name client.quota.callback.class metric.reporters metrics.num.samples
            metrics.recording.level metrics.sample.window.ms kafka.metrics.reporters
            kafka.metrics.polling.interval.secs config.providers security.providers ssl.engine.factory.class
            ssl.provider ssl.keymanager.algorithm ssl.trustmanager.algorithm ssl.secure.random.implementation
            sasl.server.callback.handler.class sasl.login.class sasl.login.callback.handler.class
            sasl.client.callback.handler.class telemetry.max.bytes allow.everyone.if.no.acl.found"""
        ),
    ),
    NotUsed(
        "socket and purgatory tuning: oncelog leaves socket buffers and backlogs to the operating system and "
        "completes delayed requests without purgatories",
        _names(
            """socket.send.buffer.bytes socket.receive.buffer.bytes socket.listen.backlog.size
            socket.connection.setup.timeout.ms socket.connection.setup.timeout.max.ms
            fetch.purgatory.purge.interval.requests producer.purgatory.purge.interval.requests
            delete.records.purgatory.purge.interval.requests share.fetch.purgatory.purge.interval.requests"""
        ),
    ),
    NotUsed(
        "log tuning oncelog does not implement (segments roll without jitter, are not preallocated, compaction "
        "cleans every dirty log)",
        _names(
            """log.roll.jitter.ms log.roll.jitter.hours log.preallocate log.cleaner.min.cleanable.ratio
            log.cleaner.min.compaction.lag.ms log.cleaner.io.max.bytes.per.second
            log.cleaner.io.buffer.size log.cleaner.io.buffer.load.factor log.cleaner.dedupe.buffer.size
            log.flush.start.offset.checkpoint.interval.ms log.initial.task.delay.ms log.dir.failure.timeout.ms
            compression.gzip.level
            compression.lz4.level compression.zstd.level offsets.load.buffer.size offsets.topic.segment.bytes
            offsets.topic.compression.codec transaction.state.log.load.buffer.size
            transaction.state.log.segment.bytes transaction.remove.expired.transaction.cleanup.interval.ms
            transaction.partition.verification.enable producer.id.expiration.check.interval.ms"""
        ),
    ),
    NotUsed(
        "features oncelog does not implement: connection quotas, delegation tokens, Kerberos and OAUTHBEARER, "
        "SASL re-authentication, TLS principal mapping",
        _names(
            """max.connections max.connections.per.ip max.connections.per.ip.overrides max.connection.creation.rate
            quota.window.num quota.window.size.seconds controller.quota.window.num
            controller.quota.window.size.seconds connections.max.reauth.ms delegation.token.secret.key
            delegation.token.expiry.time.ms delegation.token.max.lifetime.ms delegation.token.expiry.check.interval.ms
            sasl.kerberos.service.name sasl.kerberos.kinit.cmd sasl.kerberos.min.time.before.relogin
            sasl.kerberos.principal.to.local.rules sasl.kerberos.ticket.renew.jitter
            sasl.kerberos.ticket.renew.window.factor sasl.login.connect.timeout.ms sasl.login.read.timeout.ms
            sasl.login.refresh.buffer.seconds sasl.login.refresh.min.period.seconds sasl.login.refresh.window.factor
            sasl.login.refresh.window.jitter sasl.login.retry.backoff.max.ms sasl.login.retry.backoff.ms
            sasl.server.max.receive.size ssl.principal.mapping.rules ssl.endpoint.identification.algorithm
            ssl.allow.dn.changes ssl.allow.san.changes super.users"""
        ),
        prefixes=("sasl.oauthbearer.",),
    ),
    NotUsed(
        "KIP-848 and KIP-932 group protocols: oncelog's groups use the classic rebalance protocol (the GROUP "
        "configs' defaults and bounds are read)",
        _names(
            """group.coordinator.rebalance.protocols group.coordinator.append.linger.ms group.coordinator.new.enable
            max.request.partition.size.limit"""
        ),
        prefixes=("group.consumer.", "group.share.", "group.streams.", "share.coordinator."),
        # The defaults and bounds of the GROUP configs consumer.session.timeout.ms / consumer.heartbeat.interval.ms.
        read=_names(
            """group.consumer.session.timeout.ms group.consumer.min.session.timeout.ms
            group.consumer.max.session.timeout.ms group.consumer.heartbeat.interval.ms
            group.consumer.min.heartbeat.interval.ms group.consumer.max.heartbeat.interval.ms"""
        ),
    ),
    NotUsed(
        "tiered storage (KIP-405): oncelog keeps every segment in its local data dir",
        _names(
            """log.local.retention.ms log.local.retention.bytes remote.fetch.max.wait.ms
            remote.list.offsets.request.timeout.ms"""
        ),
        prefixes=("remote.log.",),
    ),
    NotUsed(
        "ZooKeeper-era settings removed in Kafka 4.0 (accepted so older files start)",
        _names(
            """offsets.commit.required.acks log.message.format.version inter.broker.protocol.version
            log.message.downconversion.enable log.message.timestamp.difference.max.ms auto.include.jmx.reporter
            broker.id.generation.enable reserved.broker.max.id control.plane.listener.name
            delegation.token.master.key"""
        ),
        prefixes=("zookeeper.", "password.encoder."),
    ),
)


def not_used_reason(name: str) -> str | None:
    """Why oncelog does not use the Kafka broker property ``name``, or None when it is not one of NOT_USED."""
    return next((group.reason for group in NOT_USED if group.covers(name)), None)


def alias_names() -> frozenset[str]:
    """Every Kafka name that ALIASES or TEXT_ALIASES apply."""
    return frozenset(TEXT_ALIASES) | {name for alias in ALIASES for name, _ in alias.names}


def suggestion(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'X'?)`` for the closest of ``known`` to ``name``, or an empty string."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


def resolve_aliases(values: dict[str, str]) -> dict[str, str]:
    """``values`` (Kafka names -> text) with each alias replaced by the property it sets, by Kafka's precedence.

    Raises ValueError when an alias's value is not a number or ``broker.id`` differs from ``node.id``."""
    result = dict(values)
    for alias in ALIASES:
        present = [(name, factor) for name, factor in alias.names if name in result]
        texts = {name: result.pop(name) for name, _ in present}
        if present:
            name, factor = present[0]
            try:
                number = int(texts[name].strip())
            except ValueError:
                raise ValueError(f"Invalid value {texts[name]} for configuration {name}: Not a number") from None
            result[alias.target] = str(-1 if number < 0 else number * factor)
    if "broker.id" in result and "node.id" in result and result["broker.id"].strip() != result["node.id"].strip():
        raise ValueError(
            f"broker.id ({result['broker.id'].strip()}) must be equal to node.id ({result['node.id'].strip()})"
        )
    for name, target in TEXT_ALIASES.items():
        text = result.pop(name, None)
        if text is not None:
            result.setdefault(target, text)
    return result


def drop_listeners(text: str, names: Iterable[str]) -> str:
    """A ``listeners`` / ``advertised.listeners`` value without the entries of the listeners ``names`` (Kafka's
    ``controller.listener.names``: a KRaft controller's, which oncelog does not serve)."""
    dropped = {name.strip().upper() for name in names if name.strip()}
    kept = [
        item for item in text.split(",") if item.strip() and item.strip().partition("://")[0].upper() not in dropped
    ]
    return ",".join(item.strip() for item in kept)
