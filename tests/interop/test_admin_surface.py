"""Interop: the admin APIs that Kafka UIs and admin tools call -- DescribeLogDirs, the ACL APIs, ElectLeaders and the
partition reassignment APIs -- with kafka-python's KafkaAdminClient and confluent-kafka's AdminClient against a real
broker process. Each answer is the one these clients get from a single-node Kafka without an authorizer.

confluent-kafka has no DescribeLogDirs or reassignment calls; neither client has a DescribeClientQuotas call (it is
covered by tests/broker/apis/test_client_quotas.py); kafkajs's ACL calls are in test_kafkajs.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import ElectionType, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KResourceType
from kafka.errors import InvalidReplicationAssignmentError, SecurityDisabledError, UnknownTopicOrPartitionError
from kafka.structs import TopicPartition as KTopicPartition
from support.broker import BrokerProcess
from support.kafka_python import kafka_python_admin
from support.topics import create_topic_confluent

NODE = 1  # the broker's node.id default
DEADLINE_S = 30.0
ELECTION_NOT_NEEDED = 84


def _on_disk(data_dir: Path, topic: str, partition: int) -> int:
    return sum(f.stat().st_size for f in (data_dir / f"{topic}-{partition}").glob("*.log"))


def test_kafka_python_describe_log_dirs_reports_the_segment_bytes_on_disk(own_broker: BrokerProcess) -> None:
    bootstrap = own_broker.bootstrap
    create_topic_confluent(bootstrap, "sized", 2)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(50):
        producer.produce("sized", value=b"record-%d" % i * 20, partition=0)
    assert producer.flush(DEADLINE_S) == 0

    with kafka_python_admin(bootstrap) as admin:
        (described,) = admin.describe_log_dirs()
        only_known = admin.describe_log_dirs({"sized": [0, 9], "missing": [0]})
    assert described["broker"] == NODE
    (log_dir,) = described["log_dirs"]
    assert (log_dir["error_code"], log_dir["log_dir"]) == (0, str(own_broker.data_dir.absolute()))
    assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0
    sizes = {(t["name"], p["partition_index"]): p["partition_size"] for t in log_dir["topics"] for p in t["partitions"]}
    assert sizes == {("sized", 0): _on_disk(own_broker.data_dir, "sized", 0), ("sized", 1): 0}
    assert sizes[("sized", 0)] > 50 * 20 * len(b"record-0")
    (log_dir,) = only_known[0]["log_dirs"]
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in log_dir["topics"]] == [("sized", [0])]


def test_kafka_python_acl_calls_see_security_disabled(bootstrap: str) -> None:
    any_topic = ResourcePatternFilter(KResourceType.TOPIC, None, ACLResourcePatternType.ANY)
    acl_filter = ACLFilter(None, "*", ACLOperation.ANY, ACLPermissionType.ANY, any_topic)
    acl = ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW, ResourcePattern(KResourceType.TOPIC, "t"))
    with kafka_python_admin(bootstrap) as admin:
        assert admin._manager.broker_version == (3, 3)  # its guess from our ApiVersions: DescribeAcls v3 is 3.3's
        with pytest.raises(SecurityDisabledError, match="No Authorizer is configured on the broker"):
            admin.describe_acls(acl_filter)
        assert admin.create_acls([acl]) == {"succeeded": [], "failed": [SecurityDisabledError]}
        assert admin.delete_acls([acl_filter]) == [(acl_filter, [], SecurityDisabledError)]


def test_kafka_python_elections_and_reassignments(bootstrap: str, make_topic: Callable[..., str]) -> None:
    topic = make_topic("elect", 2)
    with kafka_python_admin(bootstrap) as admin:
        elected = admin.elect_leaders(0, {topic: [0, 1]})  # ELECTION_NOT_NEEDED is not an error to it
        answers = [
            (r.topic, p.partition_id, p.error_code)
            for r in elected.replica_election_results
            for p in r.partition_result
        ]
        assert answers == [(topic, 0, ELECTION_NOT_NEEDED), (topic, 1, ELECTION_NOT_NEEDED)]
        with pytest.raises(UnknownTopicOrPartitionError, match=f"No such partition as {topic}-5"):
            admin.elect_leaders(0, {topic: [5]})

        moved = admin.alter_partition_reassignments({KTopicPartition(topic, 0): [NODE], KTopicPartition(topic, 1): [2]})
        assert moved == {KTopicPartition(topic, 0): None, KTopicPartition(topic, 1): InvalidReplicationAssignmentError}
        assert admin.list_partition_reassignments() == {}
        assert admin.list_partition_reassignments({topic: [0, 1]}) == {}


def test_confluent_kafka_acl_calls(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    any_acl = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    # librdkafka reads DescribeAcls' top-level error but does not report it: against Kafka without an authorizer,
    # too, the call succeeds with no bindings.
    assert admin.describe_acls(any_acl).result(DEADLINE_S) == []
    binding = AclBinding(
        ResourceType.TOPIC,
        "t",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    for futures in (admin.create_acls([binding]), admin.delete_acls([any_acl])):
        (future,) = futures.values()
        with pytest.raises(KafkaException) as raised:
            future.result(DEADLINE_S)
        error: KafkaError = raised.value.args[0]
        assert (error.code(), error.str()) == (KafkaError.SECURITY_DISABLED, "No Authorizer is configured.")


def test_confluent_kafka_elect_leaders(bootstrap: str, make_topic: Callable[..., str]) -> None:
    topic = make_topic("celect", 2)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for election in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        asked = [TopicPartition(topic, 0), TopicPartition(topic, 1), TopicPartition(topic, 7)]
        result = admin.elect_leaders(election, asked).result(DEADLINE_S)
        assert {(tp.topic, tp.partition): error.code() for tp, error in result.items()} == {
            (topic, 0): KafkaError.ELECTION_NOT_NEEDED,
            (topic, 1): KafkaError.ELECTION_NOT_NEEDED,
            (topic, 7): KafkaError.UNKNOWN_TOPIC_OR_PART,
        }
    # Every partition: Kafka lists none, since no election was needed.
    assert admin.elect_leaders(ElectionType.PREFERRED, None).result(DEADLINE_S) == {}
