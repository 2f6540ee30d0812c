"""Kafka API keys, and the one registry of the APIs oncelog declares and serves (:data:`APIS`).

Each :class:`Api` names its key, its message module (REQUEST and RESPONSE schemas: the versions it can
encode and decode) and the range it advertises in ApiVersions; ``SUPPORTED_VERSIONS``, ``DECLARED_VERSIONS``
and ``SCHEMAS`` are views of it. The broker keys its handler table by the same keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from types import ModuleType

from oncelog.protocol.messages import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_partition_reassignments,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)
from oncelog.protocol.schema import Message


class ApiKey(IntEnum):
    """Every Kafka API key, named as in Kafka's ApiKeys enum."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    CONTROLLER_REGISTRATION = 70
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    ASSIGN_REPLICAS_TO_DIRS = 73
    LIST_CLIENT_METRICS_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    UPDATE_RAFT_VOTER = 82
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87


@dataclass(frozen=True)
class Api:
    """One API: its key, its request/response schemas and the version range oncelog serves and advertises.

    Guaranteed on construction: the schemas carry this key, and the advertised range lies within the versions
    the schemas declare.
    """

    key: ApiKey
    messages: ModuleType  # a protocol.messages module: REQUEST and RESPONSE
    advertised: tuple[int, int]

    @property
    def request(self) -> Message:
        return self.messages.REQUEST

    @property
    def response(self) -> Message:
        return self.messages.RESPONSE

    @property
    def declared(self) -> tuple[int, int]:
        """The lowest and highest version the request schema declares (advertised or not)."""
        valid = [v for v in range(0, 64) if self.request.has_version(v)]
        return valid[0], valid[-1]

    def __post_init__(self) -> None:
        if not self.request.api_key == self.response.api_key == self.key:
            raise ValueError(f"{self.key.name}: schemas of api key {self.request.api_key}")
        low, high = self.declared
        if not low <= self.advertised[0] <= self.advertised[1] <= high:
            raise ValueError(f"{self.key.name}: advertised {self.advertised} outside declared {self.declared}")


# Exactly what we implement and advertise (ApiVersions response), with the message module declaring each API's
# schemas. Ranges per the client survey in shared/reference/client-protocol-requirements.md ("recommended" set,
# plus flexible versions we implement).
APIS: dict[ApiKey, Api] = {
    api.key: api
    for api in (
        Api(ApiKey.PRODUCE, produce, (0, 10)),
        Api(ApiKey.FETCH, fetch, (4, 13)),  # v13: topics by id (KIP-516)
        Api(ApiKey.LIST_OFFSETS, list_offsets, (1, 7)),
        # Consumers validate their positions with it after a leader change (KIP-320); followers find their divergent
        # tail (KIP-101). Kafka 4.0's range: v0-1 were removed (KIP-896).
        Api(ApiKey.OFFSET_FOR_LEADER_EPOCH, offset_for_leader_epoch, (2, 4)),
        Api(ApiKey.METADATA, metadata, (0, 12)),  # v10-12: topic ids (KIP-516)
        Api(ApiKey.API_VERSIONS, api_versions, (0, 3)),
        Api(ApiKey.CREATE_TOPICS, create_topics, (0, 7)),  # v7: the new topic's id (KIP-516)
        Api(ApiKey.DELETE_TOPICS, delete_topics, (0, 6)),  # v6: topics by id (KIP-516)
        Api(ApiKey.DELETE_RECORDS, delete_records, (0, 2)),
        Api(ApiKey.INIT_PRODUCER_ID, init_producer_id, (0, 4)),
        Api(ApiKey.DESCRIBE_CONFIGS, describe_configs, (0, 4)),
        Api(ApiKey.ALTER_CONFIGS, alter_configs, (0, 2)),
        Api(ApiKey.INCREMENTAL_ALTER_CONFIGS, incremental_alter_configs, (0, 1)),
        Api(ApiKey.FIND_COORDINATOR, find_coordinator, (0, 4)),
        Api(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_to_txn, (0, 3)),
        Api(ApiKey.ADD_OFFSETS_TO_TXN, add_offsets_to_txn, (0, 3)),
        Api(ApiKey.END_TXN, end_txn, (0, 5)),  # v5: epoch bump per transaction (KIP-890 part 2)
        Api(ApiKey.WRITE_TXN_MARKERS, write_txn_markers, (0, 1)),
        Api(ApiKey.DESCRIBE_PRODUCERS, describe_producers, (0, 0)),
        Api(ApiKey.DESCRIBE_TRANSACTIONS, describe_transactions, (0, 0)),
        Api(ApiKey.LIST_TRANSACTIONS, list_transactions, (0, 1)),
        Api(ApiKey.JOIN_GROUP, join_group, (0, 7)),
        Api(ApiKey.SYNC_GROUP, sync_group, (0, 5)),
        Api(ApiKey.HEARTBEAT, heartbeat, (0, 4)),
        Api(ApiKey.LEAVE_GROUP, leave_group, (0, 4)),
        Api(ApiKey.OFFSET_COMMIT, offset_commit, (2, 9)),  # v9: KIP-848 members' commits
        Api(ApiKey.OFFSET_FETCH, offset_fetch, (1, 7)),
        Api(ApiKey.OFFSET_DELETE, offset_delete, (0, 0)),
        Api(ApiKey.DESCRIBE_GROUPS, describe_groups, (0, 5)),
        Api(ApiKey.LIST_GROUPS, list_groups, (0, 5)),
        Api(ApiKey.DELETE_GROUPS, delete_groups, (0, 2)),
        Api(ApiKey.TXN_OFFSET_COMMIT, txn_offset_commit, (0, 3)),
        # KIP-848 consumer groups (broker/group/consumer_coordinator.py): Kafka 4.0's ranges.
        Api(ApiKey.CONSUMER_GROUP_HEARTBEAT, consumer_group_heartbeat, (0, 1)),
        Api(ApiKey.CONSUMER_GROUP_DESCRIBE, consumer_group_describe, (0, 0)),
        Api(ApiKey.CREATE_PARTITIONS, create_partitions, (0, 3)),
        Api(ApiKey.DESCRIBE_CLUSTER, describe_cluster, (0, 1)),
        # Admin APIs of UIs and admin tools, answered as a single-node Kafka without an authorizer answers them.
        Api(ApiKey.DESCRIBE_LOG_DIRS, describe_log_dirs, (1, 4)),
        Api(ApiKey.DESCRIBE_ACLS, describe_acls, (1, 3)),
        Api(ApiKey.CREATE_ACLS, create_acls, (1, 3)),
        Api(ApiKey.DELETE_ACLS, delete_acls, (1, 3)),
        Api(ApiKey.ELECT_LEADERS, elect_leaders, (0, 2)),
        Api(ApiKey.ALTER_PARTITION_REASSIGNMENTS, alter_partition_reassignments, (0, 0)),
        Api(ApiKey.LIST_PARTITION_REASSIGNMENTS, list_partition_reassignments, (0, 0)),
        Api(ApiKey.DESCRIBE_CLIENT_QUOTAS, describe_client_quotas, (0, 1)),
        # SASL (KIP-43, KIP-152) and SCRAM credential management (KIP-554): Kafka 4.x's ranges, on every listener.
        Api(ApiKey.SASL_HANDSHAKE, sasl_handshake, (0, 1)),
        Api(ApiKey.SASL_AUTHENTICATE, sasl_authenticate, (0, 2)),
        Api(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, describe_user_scram_credentials, (0, 0)),
        Api(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, alter_user_scram_credentials, (0, 0)),
    )
}

#: Advertised (served) version range per API key.
SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {key: api.advertised for key, api in APIS.items()}
#: Every version the schemas can encode and decode per API key, advertised or not (the client may use them).
DECLARED_VERSIONS: dict[ApiKey, tuple[int, int]] = {key: api.declared for key, api in APIS.items()}
#: (request, response) schema per API key.
SCHEMAS: dict[ApiKey, tuple[Message, Message]] = {key: (api.request, api.response) for key, api in APIS.items()}
