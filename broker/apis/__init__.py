"""One handler per API key: validate, call a component, build the response body."""

from __future__ import annotations

from oncelog.broker.apis import (
    api_versions,
    create_topics,
    delete_topics,
    describe_configs,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
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
}

# Advertise only what is implemented: every advertised key has a handler and vice versa.
assert set(HANDLERS) == set(SUPPORTED_VERSIONS), "HANDLERS and SUPPORTED_VERSIONS disagree"
