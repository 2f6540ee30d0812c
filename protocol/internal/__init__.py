"""Formats of Kafka's internal topics and coordinator helpers (sans-IO): ``__transaction_state`` records and
Java-compatible hashing for coordinator partition placement."""
