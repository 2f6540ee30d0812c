"""Partition replication, Kafka's way: followers fetch from leaders; the decisions here are pure, the I/O is not."""
