"""The API version ranges this client can speak, and version negotiation against a broker's ApiVersions."""

from __future__ import annotations

from collections.abc import Mapping

from oncelog.client.errors import UnsupportedVersionError
from oncelog.protocol import DECLARED_VERSIONS, ApiKey

# What the client's request builders fill in correctly: (lowest, highest). Capped by the declared schemas, so
# group APIs join automatically once their schemas exist.
_WANTED: dict[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 9),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),  # a follower's truncation (KIP-101); bodies built by the caller
    ApiKey.METADATA: (1, 9),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (2, 5),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_TOPICS: (1, 5),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.FIND_COORDINATOR: (1, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 5),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.JOIN_GROUP: (1, 7),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 4),
    ApiKey.OFFSET_COMMIT: (2, 8),
    ApiKey.OFFSET_FETCH: (1, 7),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 4),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKey.SASL_HANDSHAKE: (1, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
}

CLIENT_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    key: (max(lo, DECLARED_VERSIONS[key][0]), min(hi, DECLARED_VERSIONS[key][1]))
    for key, (lo, hi) in _WANTED.items()
    if key in DECLARED_VERSIONS
}


def negotiate(broker: Mapping[int, tuple[int, int]]) -> dict[ApiKey, int]:
    """Per API both sides know: min(our max, broker max), when that is within both ranges."""
    chosen: dict[ApiKey, int] = {}
    for key, (lo, hi) in CLIENT_VERSIONS.items():
        if key not in broker:
            continue
        b_lo, b_hi = broker[key]
        version = min(hi, b_hi)
        if version >= max(lo, b_lo):
            chosen[key] = version
    return chosen


def pick(chosen: Mapping[ApiKey, int], key: ApiKey) -> int:
    """The negotiated version of ``key``; UnsupportedVersionError when the broker and we share none."""
    try:
        return chosen[key]
    except KeyError:
        raise UnsupportedVersionError(f"the broker supports no version of {key.name} that this client speaks") from None
