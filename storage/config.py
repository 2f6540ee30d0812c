"""Per-log configuration with Kafka's broker defaults."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

#: Java's Long.MAX_VALUE: Kafka's "never" for flush.messages and flush.ms.
LONG_MAX = 9223372036854775807
#: compression.type values naming a codec, with its id in a batch's attributes ("producer" keeps the batch's own).
COMPRESSION_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@dataclass(frozen=True)
class LogConfig:
    """Settings of one partition log; every field is the Kafka property named in its comment."""

    segment_bytes: int = 1073741824  # log.segment.bytes
    segment_ms: int = 604800000  # log.roll.ms (roll when the active segment's first batch is older)
    index_interval_bytes: int = 4096  # log.index.interval.bytes
    max_index_size: int = 10485760  # log.index.size.max.bytes (roll when the index is full)
    retention_ms: int = 604800000  # log.retention.ms (-1 = forever)
    retention_bytes: int = -1  # log.retention.bytes (-1 = unlimited)
    max_message_bytes: int = 1048588  # message.max.bytes (largest batch accepted)
    producer_id_expiration_ms: int = 86400000  # producer.id.expiration.ms
    # file.delete.delay.ms: oncelog deletes segment files immediately (reads use the same thread as deletion
    # and flushes sync duplicated descriptors), so the delay is not needed; kept for config compatibility.
    file_delete_delay_ms: int = 60000
    cleanup_policy: tuple[str, ...] = ("delete",)  # cleanup.policy: "delete", "compact" or both
    delete_retention_ms: int = 86400000  # delete.retention.ms: how long compaction keeps a key's tombstone
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type: "CreateTime" or "LogAppendTime"
    # message.timestamp.before.max.ms / message.timestamp.after.max.ms (KIP-937; Kafka 4.0 defaults, KIP-1030):
    # how far a CreateTime record's timestamp may be behind / ahead of the broker's clock.
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3600000
    min_insync_replicas: int = 1  # min.insync.replicas: acks=all appends need this many in-sync replicas
    compression_type: str = "producer"  # compression.type: "producer" (keep the batch's codec) or a codec name
    # log.flush.interval.messages / flush.messages: unflushed messages that trigger an fsync (oncelog's default 1,
    # with flush_ms unset, is fsync before acknowledging; Kafka's is Long.MAX_VALUE).
    flush_messages: int = 1
    flush_ms: int = -1  # log.flush.interval.ms / flush.ms: longest time data stays unflushed (-1 or Long.MAX: unset)
    # log.cleaner.max.compaction.lag.ms / max.compaction.lag.ms: longest a record of a compacted log stays
    # uncompacted; bounds the active segment's age (Kafka's LogConfig.maxSegmentMs), since only rolled segments are
    # compacted, and every compaction pass (log.cleaner.backoff.ms) cleans every rolled dirty segment.
    max_compaction_lag_ms: int = LONG_MAX

    @property
    def flushes_by_time(self) -> bool:
        """flush.ms is set: data is fsynced at the latest ``flush_ms`` after the log's last fsync."""
        return 0 <= self.flush_ms < LONG_MAX

    @cached_property
    def fsync_before_ack(self) -> bool:
        """Every acknowledged append is fsynced first (flush.messages=1, flush.ms unset); else page-cache mode.
        Computed once per config: the append path reads it like a plain attribute."""
        return self.flush_messages == 1 and not self.flushes_by_time

    @property
    def max_segment_ms(self) -> int:
        """The age that rolls the active segment: segment.ms, or max.compaction.lag.ms when a compacted log's is
        lower (Kafka's LogConfig.maxSegmentMs)."""
        if self.compacts and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def deletes(self) -> bool:
        """Old segments are deleted by retention.ms / retention.bytes (cleanup.policy holds "delete")."""
        return "delete" in self.cleanup_policy

    @property
    def compression_codec(self) -> int | None:
        """The codec id appended batches are recompressed to, or None to keep each batch's own ("producer")."""
        return COMPRESSION_CODECS.get(self.compression_type)

    @property
    def log_append_time(self) -> bool:
        """Every appended batch gets the append time as its timestamp (message.timestamp.type=LogAppendTime)."""
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def compacts(self) -> bool:
        """Only the latest record per key needs keeping (cleanup.policy holds "compact")."""
        return "compact" in self.cleanup_policy
