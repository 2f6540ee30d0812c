"""One handler per API key: validate, call a component, build the response body."""

from __future__ import annotations

from oncelog.broker.apis import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    api_versions,
    create_topics,
    delete_topics,
    describe_configs,
    describe_producers,
    describe_transactions,
    end_txn,
    fetch,
    find_coordinator,
    init_producer_id,
    list_offsets,
    list_transactions,
    metadata,
    produce,
    write_txn_markers,
)
from oncelog.broker.request import Handler
from oncelog.protocol import SUPPORTED_VERSIONS, ApiKey

HANDLERS: dict[ApiKey, Handler] = {
    ApiKey.PRODUCE: produce.handle,
    ApiKey.FETCH: fetch.handle,
    ApiKey.LIST_OFFSETS: list_offsets.handle,
    ApiKey.METADATA: metadata.handle,
    ApiKey.API_VERSIONS: api_versions.handle,
    ApiKey.CREATE_TOPICS: create_topics.handle,
    ApiKey.DELETE_TOPICS: delete_topics.handle,
    ApiKey.INIT_PRODUCER_ID: init_producer_id.handle,
    ApiKey.DESCRIBE_CONFIGS: describe_configs.handle,
    ApiKey.FIND_COORDINATOR: find_coordinator.handle,
    ApiKey.ADD_PARTITIONS_TO_TXN: add_partitions_to_txn.handle,
    ApiKey.ADD_OFFSETS_TO_TXN: add_offsets_to_txn.handle,
    ApiKey.END_TXN: end_txn.handle,
    ApiKey.WRITE_TXN_MARKERS: write_txn_markers.handle,
    ApiKey.DESCRIBE_PRODUCERS: describe_producers.handle,
    ApiKey.DESCRIBE_TRANSACTIONS: describe_transactions.handle,
    ApiKey.LIST_TRANSACTIONS: list_transactions.handle,
}

# Advertise only what is implemented: every advertised key has a handler and vice versa.
assert set(HANDLERS) == set(SUPPORTED_VERSIONS), "HANDLERS and SUPPORTED_VERSIONS disagree"
