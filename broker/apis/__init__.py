"""One handler per API key: validate, call a component, build the response body.

The APIs themselves (keys, schemas, advertised ranges) are registered once, in ``protocol.api.APIS``; this table
only maps each of them to its handler, and refuses to load when an advertised API has none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from oncelog.broker.apis import (
    acls,
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_transactions,
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
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    partition_reassignments,
    produce,
    sasl,
    scram_credentials,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)
from oncelog.broker.request import Handler
from oncelog.protocol import APIS, ApiKey

HANDLERS: dict[ApiKey, Handler] = {
    ApiKey.PRODUCE: produce.handle,
    ApiKey.FETCH: fetch.handle,
    ApiKey.LIST_OFFSETS: list_offsets.handle,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch.handle,
    ApiKey.METADATA: metadata.handle,
    ApiKey.API_VERSIONS: api_versions.handle,
    ApiKey.CREATE_TOPICS: create_topics.handle,
    ApiKey.DELETE_TOPICS: delete_topics.handle,
    ApiKey.DELETE_RECORDS: delete_records.handle,
    ApiKey.INIT_PRODUCER_ID: init_producer_id.handle,
    ApiKey.DESCRIBE_CONFIGS: describe_configs.handle,
    ApiKey.ALTER_CONFIGS: alter_configs.handle,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs.handle,
    ApiKey.FIND_COORDINATOR: find_coordinator.handle,
    ApiKey.ADD_PARTITIONS_TO_TXN: add_partitions_to_txn.handle,
    ApiKey.ADD_OFFSETS_TO_TXN: add_offsets_to_txn.handle,
    ApiKey.END_TXN: end_txn.handle,
    ApiKey.WRITE_TXN_MARKERS: write_txn_markers.handle,
    ApiKey.DESCRIBE_PRODUCERS: describe_producers.handle,
    ApiKey.DESCRIBE_TRANSACTIONS: describe_transactions.handle,
    ApiKey.LIST_TRANSACTIONS: list_transactions.handle,
    ApiKey.OFFSET_COMMIT: offset_commit.handle,
    ApiKey.OFFSET_FETCH: offset_fetch.handle,
    ApiKey.OFFSET_DELETE: offset_delete.handle,
    ApiKey.JOIN_GROUP: join_group.handle,
    ApiKey.HEARTBEAT: heartbeat.handle,
    ApiKey.LEAVE_GROUP: leave_group.handle,
    ApiKey.SYNC_GROUP: sync_group.handle,
    ApiKey.DESCRIBE_GROUPS: describe_groups.handle,
    ApiKey.LIST_GROUPS: list_groups.handle,
    ApiKey.DELETE_GROUPS: delete_groups.handle,
    ApiKey.TXN_OFFSET_COMMIT: txn_offset_commit.handle,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: consumer_group_heartbeat.handle,
    ApiKey.CONSUMER_GROUP_DESCRIBE: consumer_group_describe.handle,
    ApiKey.CREATE_PARTITIONS: create_partitions.handle,
    ApiKey.DESCRIBE_CLUSTER: describe_cluster.handle,
    ApiKey.DESCRIBE_LOG_DIRS: describe_log_dirs.handle,
    ApiKey.DESCRIBE_ACLS: acls.handle_describe,
    ApiKey.CREATE_ACLS: acls.handle_create,
    ApiKey.DELETE_ACLS: acls.handle_delete,
    ApiKey.ELECT_LEADERS: elect_leaders.handle,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: partition_reassignments.handle_alter,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: partition_reassignments.handle_list,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: describe_client_quotas.handle,
    ApiKey.SASL_HANDSHAKE: sasl.handle_handshake,
    ApiKey.SASL_AUTHENTICATE: sasl.handle_authenticate,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: scram_credentials.handle_describe,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: scram_credentials.handle_alter,
}


#: What the worker thread that decodes a large request (``broker.server``) also does to its decoded body, by API:
#: reduce it in place to what the handler keeps (``fn(api_version, body)``, pure), so that work and the freeing of
#: what is dropped stay off the event loop.
DIGESTS: dict[ApiKey, Callable[[int, Any], None]] = {
    ApiKey.FETCH: fetch.merge_listings,
    ApiKey.METADATA: metadata.merge_listings,
}


def unhandled(handlers: dict[ApiKey, Handler] = HANDLERS) -> list[ApiKey]:
    """The advertised APIs without a handler (none, or the broker would answer them by closing the connection)."""
    return sorted(set(APIS) - set(handlers))


if unhandled():
    raise ImportError(f"advertised APIs without a handler: {[k.name for k in unhandled()]}")
