"""The classic consumer group coordinator and committed offsets, persisted in ``__consumer_offsets``."""
