"""One module per Kafka API, each declaring REQUEST and RESPONSE schemas; ``protocol.api.APIS`` registers them."""
