"""The coordinators follow the leadership of their internal partitions (partition states applied by hand, no etcd):
an id or group whose partition another broker leads is answered NOT_COORDINATOR and dropped; leading it again loads
it from the log (COORDINATOR_LOAD_IN_PROGRESS until then) at the new leader epoch, which is the coordinator epoch its
markers carry, so a marker of the older coordinator is refused with TRANSACTION_COORDINATOR_FENCED."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import trio
from oncelog.broker.clock import now_ms
from oncelog.broker.controller.partition_change import PartitionState
from oncelog.broker.group.coordinator import JoinRequest
from oncelog.broker.metadata import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from oncelog.broker.node import BrokerNode
from oncelog.broker.txn.markers import TxnMarker, append_markers
from oncelog.protocol import ErrorCode
from oncelog.protocol.internal.group_log import OffsetValue
from oncelog.protocol.internal.transaction_log import TxnState
from support.replication_cluster import ReplicationCluster

FENCED = ErrorCode.PRODUCER_FENCED
DATA = ("data", 0)
WAIT_S = 10


@pytest.fixture
async def node(nursery: trio.Nursery, tmp_path) -> AsyncIterator[BrokerNode]:
    cluster = ReplicationCluster(nursery, tmp_path, [1])
    await cluster.start(1)
    await cluster.create_topic(DATA[0])
    yield cluster.node(1)
    await cluster.stop_all()


def follow(node: BrokerNode, topic: str, partition: int, leader_epoch: int) -> None:
    """Broker 2 leads the partition now; this one follows."""
    state = PartitionState(replicas=(1, 2), isr=(1, 2), leader=2, leader_epoch=leader_epoch)
    node.replicas.apply_partition_state(topic, partition, state, now_ms=now_ms())


def lead(node: BrokerNode, topic: str, partition: int, leader_epoch: int) -> None:
    state = PartitionState(replicas=(1,), isr=(1,), leader=1, leader_epoch=leader_epoch)
    node.replicas.apply_partition_state(topic, partition, state, now_ms=now_ms())


async def until(condition: Callable[[], bool]) -> None:
    with trio.fail_after(WAIT_S):
        while not condition():
            await trio.sleep(0.01)


async def test_the_transaction_coordinator_serves_only_the_state_partitions_it_leads(node: BrokerNode) -> None:
    coordinator = node.transactions
    await coordinator.state_log.ensure_topic()
    tid = "writer-1"
    partition = coordinator.state_log.partition_for(tid)
    error, producer_id, epoch = await coordinator.init_producer_id(tid, 60000, -1, -1, FENCED)
    assert error == ErrorCode.NONE  # led with no state applied: the single node's

    follow(node, TRANSACTION_STATE_TOPIC, partition, leader_epoch=1)
    assert coordinator.status(tid) == ErrorCode.NOT_COORDINATOR
    assert coordinator.get(tid) is None
    assert (await coordinator.init_producer_id(tid, 60000, -1, -1, FENCED))[0] == ErrorCode.NOT_COORDINATOR
    assert await coordinator.add_partitions(tid, producer_id, epoch, [DATA], FENCED) == ErrorCode.NOT_COORDINATOR
    assert (await coordinator.end_transaction(tid, producer_id, epoch, True, FENCED))[0] == ErrorCode.NOT_COORDINATOR
    other = next(
        f"writer-{i}" for i in range(2, 500) if coordinator.state_log.partition_for(f"writer-{i}") != partition
    )
    assert coordinator.status(other) == ErrorCode.NONE  # the other partitions are still led here

    lead(node, TRANSACTION_STATE_TOPIC, partition, leader_epoch=2)
    assert coordinator.status(tid) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert (await coordinator.init_producer_id(tid, 60000, -1, -1, FENCED))[0] == (
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    )
    await until(lambda: coordinator.status(tid) == ErrorCode.NONE)
    loaded = coordinator.get(tid)
    assert loaded is not None and (loaded.producer_id, loaded.producer_epoch) == (producer_id, epoch)
    assert coordinator.partitions.owned[partition] == 2

    # A transaction ends with markers of coordinator epoch 2: a marker of an older coordinator is then refused.
    assert await coordinator.add_partitions(tid, producer_id, epoch, [DATA], FENCED) == ErrorCode.NONE
    assert (await coordinator.end_transaction(tid, producer_id, epoch, True, FENCED))[0] == ErrorCode.NONE
    stale = TxnMarker(producer_id, epoch, 1, False, frozenset([DATA]))
    assert (
        append_markers(node.replicas, stale, [DATA], listener=node.groups)[DATA][0]
        == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    )
    current = TxnMarker(producer_id, epoch, 2, True, frozenset([DATA]))
    assert append_markers(node.replicas, current, [DATA], listener=node.groups)[DATA][0] == ErrorCode.NONE


async def test_the_group_coordinator_serves_only_the_offsets_partitions_it_leads(node: BrokerNode) -> None:
    groups = node.groups
    group_id = "readers"
    partition = groups.group_log.partition_for(group_id)
    offsets = {DATA: OffsetValue(offset=42, commit_timestamp_ms=now_ms())}
    assert await groups.commit_offsets(group_id, -1, "", None, offsets) == {DATA: ErrorCode.NONE}

    follow(node, CONSUMER_OFFSETS_TOPIC, partition, leader_epoch=1)
    assert groups.status(group_id) == ErrorCode.NOT_COORDINATOR
    assert groups.get(group_id) is None
    assert groups.fetch_offsets(group_id, [DATA], False) == (ErrorCode.NOT_COORDINATOR, [])
    assert await groups.commit_offsets(group_id, -1, "", None, offsets) == {DATA: ErrorCode.NOT_COORDINATOR}
    assert await groups.heartbeat(group_id, 1, "member", None) == ErrorCode.NOT_COORDINATOR

    lead(node, CONSUMER_OFFSETS_TOPIC, partition, leader_epoch=2)
    await until(lambda: groups.status(group_id) == ErrorCode.NONE)
    error, fetched = groups.fetch_offsets(group_id, [DATA], False)
    assert error == ErrorCode.NONE and fetched[0][:2] == (DATA, 42)


async def test_a_groups_generation_survives_a_move_of_its_coordinator(node: BrokerNode) -> None:
    """A group's generation and members are in ``__consumer_offsets``: the coordinator that loads the partition
    knows them (a member of the generation heartbeats on, an older generation is refused), and the next rebalance
    goes on from that generation instead of starting again at 1 (which would let an old member's commit through)."""
    groups = node.groups
    group_id = "generations"
    partition = groups.group_log.partition_for(group_id)

    def join(member_id: str) -> JoinRequest:
        return JoinRequest(group_id, member_id, "reader-1", False, "c", "h", 10000, 10000, "consumer", [("r", b"")])

    joined = await groups.join_group(join(""))
    member, generation = joined["member_id"], joined["generation_id"]
    assert (joined["error_code"], generation) == (ErrorCode.NONE, 1)
    synced = await groups.sync_group(group_id, generation, member, "reader-1", "consumer", "r", {member: b"a"})
    assert synced[0] == ErrorCode.NONE

    follow(node, CONSUMER_OFFSETS_TOPIC, partition, leader_epoch=1)
    assert groups.get(group_id) is None
    lead(node, CONSUMER_OFFSETS_TOPIC, partition, leader_epoch=2)
    await until(lambda: groups.status(group_id) == ErrorCode.NONE)

    assert await groups.heartbeat(group_id, generation, member, "reader-1") == ErrorCode.NONE
    assert await groups.heartbeat(group_id, generation - 1, member, "reader-1") == ErrorCode.ILLEGAL_GENERATION
    rejoined = await groups.join_group(join(member))
    assert rejoined["error_code"] == ErrorCode.NONE and rejoined["generation_id"] >= generation


async def test_timeouts_and_expiration_run_only_on_the_owning_coordinator(node: BrokerNode) -> None:
    """A broker that lost an id's state partition neither aborts its timed-out transaction nor expires the id: it
    writes nothing to the state log and no marker (the new coordinator owns both); once it leads the partition
    again, the loaded transaction times out there."""
    coordinator = node.transactions
    await coordinator.state_log.ensure_topic()
    tid = "timing-out"
    partition = coordinator.state_log.partition_for(tid)
    idle = next(f"idle-{i}" for i in range(500) if coordinator.state_log.partition_for(f"idle-{i}") == partition)
    _, producer_id, epoch = await coordinator.init_producer_id(tid, 1000, -1, -1, FENCED)
    assert await coordinator.add_partitions(tid, producer_id, epoch, [DATA], FENCED) == ErrorCode.NONE
    assert (await coordinator.init_producer_id(idle, 1000, -1, -1, FENCED))[0] == ErrorCode.NONE

    def ends() -> tuple[int, int]:
        state_log = node.logs.get(TRANSACTION_STATE_TOPIC, partition)
        return state_log.log_end_offset, node.logs.get(*DATA).log_end_offset

    follow(node, TRANSACTION_STATE_TOPIC, partition, leader_epoch=1)
    before = ends()
    far_future = now_ms() + 10**12  # past the transaction's timeout and transactional.id.expiration.ms
    await coordinator.abort_timed_out(far_future)
    await coordinator.expire_idle_ids(far_future)
    assert ends() == before

    lead(node, TRANSACTION_STATE_TOPIC, partition, leader_epoch=2)
    await until(lambda: coordinator.status(tid) == ErrorCode.NONE)
    loaded = coordinator.get(tid)
    assert loaded is not None and loaded.state == TxnState.ONGOING
    await coordinator.abort_timed_out(far_future)
    await until(lambda: coordinator.get(tid) is not None and coordinator.get(tid).state == TxnState.COMPLETE_ABORT)
    assert ends()[1] > before[1]  # the abort marker, written by the owner
