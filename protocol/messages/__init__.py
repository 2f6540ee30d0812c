"""One module per Kafka API, each declaring REQUEST and RESPONSE schemas; ``SCHEMAS`` indexes them by key."""

from oncelog.protocol.api import ApiKey
from oncelog.protocol.messages import (
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
    txn_offset_commit,
    write_txn_markers,
)
from oncelog.protocol.schema import Message

# (request, response) schema per API key, for every API we declare (advertised or not).
SCHEMAS: dict[ApiKey, tuple[Message, Message]] = {
    ApiKey.PRODUCE: (produce.REQUEST, produce.RESPONSE),
    ApiKey.FETCH: (fetch.REQUEST, fetch.RESPONSE),
    ApiKey.LIST_OFFSETS: (list_offsets.REQUEST, list_offsets.RESPONSE),
    ApiKey.METADATA: (metadata.REQUEST, metadata.RESPONSE),
    ApiKey.FIND_COORDINATOR: (find_coordinator.REQUEST, find_coordinator.RESPONSE),
    ApiKey.API_VERSIONS: (api_versions.REQUEST, api_versions.RESPONSE),
    ApiKey.CREATE_TOPICS: (create_topics.REQUEST, create_topics.RESPONSE),
    ApiKey.DELETE_TOPICS: (delete_topics.REQUEST, delete_topics.RESPONSE),
    ApiKey.INIT_PRODUCER_ID: (init_producer_id.REQUEST, init_producer_id.RESPONSE),
    ApiKey.ADD_PARTITIONS_TO_TXN: (add_partitions_to_txn.REQUEST, add_partitions_to_txn.RESPONSE),
    ApiKey.ADD_OFFSETS_TO_TXN: (add_offsets_to_txn.REQUEST, add_offsets_to_txn.RESPONSE),
    ApiKey.END_TXN: (end_txn.REQUEST, end_txn.RESPONSE),
    ApiKey.WRITE_TXN_MARKERS: (write_txn_markers.REQUEST, write_txn_markers.RESPONSE),
    ApiKey.TXN_OFFSET_COMMIT: (txn_offset_commit.REQUEST, txn_offset_commit.RESPONSE),
    ApiKey.DESCRIBE_CONFIGS: (describe_configs.REQUEST, describe_configs.RESPONSE),
    ApiKey.DESCRIBE_PRODUCERS: (describe_producers.REQUEST, describe_producers.RESPONSE),
    ApiKey.DESCRIBE_TRANSACTIONS: (describe_transactions.REQUEST, describe_transactions.RESPONSE),
    ApiKey.LIST_TRANSACTIONS: (list_transactions.REQUEST, list_transactions.RESPONSE),
}
