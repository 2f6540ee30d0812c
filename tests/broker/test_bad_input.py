"""Bad input gets a Kafka error code or a clean close, never a crashed broker or a partial append."""

from __future__ import annotations

import socket
import struct
import tracemalloc

import pytest
import trio
from oncelog.broker import server
from oncelog.broker.request_budget import RequestBudget
from oncelog.broker.server import FrameReader
from oncelog.broker.socket_io import NonBlockingSocket
from oncelog.protocol import SUPPORTED_VERSIONS, ApiKey, ErrorCode, decode_response
from oncelog.protocol.records import SimpleRecord, encode_batch

from broker.helpers import batch, create_topic_body, list_offsets_body, produce_body


async def _assert_alive(broker) -> None:
    other = await broker.connect()
    response = await other.request(ApiKey.API_VERSIONS, 0, {})
    assert response.error_code == ErrorCode.NONE


async def test_api_versions_lists_every_supported_range(client) -> None:
    for version in range(4):
        response = await client.request(
            ApiKey.API_VERSIONS, version, {"client_software_name": "t", "client_software_version": "1"}
        )
        assert response.error_code == ErrorCode.NONE
        ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert ranges == {int(k): v for k, v in SUPPORTED_VERSIONS.items()}


async def test_api_versions_unsupported_version_gets_v0_error_body(client) -> None:
    # Header v1 for ApiVersions v127: key, version, correlation id, client id.
    frame = struct.pack(">hhih", 18, 127, 77, 1) + b"x"
    await client.send_raw(struct.pack(">i", len(frame)) + frame)
    response_frame = await client.read_frame()
    assert response_frame is not None
    response = decode_response(ApiKey.API_VERSIONS, 0, response_frame)
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert any(k.api_key == 18 for k in response.api_keys)
    assert struct.unpack_from(">i", response_frame)[0] == 77


async def test_oversized_frame_closes_connection_without_reading_it(broker, client) -> None:
    await client.send_raw(struct.pack(">i", 104857600 + 1))
    assert await client.is_closed_by_peer()
    await _assert_alive(broker)


async def test_negative_frame_size_closes_connection(broker, client) -> None:
    await client.send_raw(struct.pack(">i", -5) + b"abc")
    assert await client.is_closed_by_peer()
    await _assert_alive(broker)


async def test_unknown_api_key_closes_connection(broker, client) -> None:
    frame = struct.pack(">hhih", 9999, 0, 1, -1)
    await client.send_raw(struct.pack(">i", len(frame)) + frame)
    assert await client.is_closed_by_peer()
    await _assert_alive(broker)


async def test_garbage_body_closes_connection(broker, client) -> None:
    # A Metadata v1 header followed by an array claiming 2^31-1 topics and nothing else.
    frame = struct.pack(">hhih", 3, 1, 1, -1) + struct.pack(">i", 2**31 - 1)
    await client.send_raw(struct.pack(">i", len(frame)) + frame)
    assert await client.is_closed_by_peer()
    await _assert_alive(broker)


async def test_truncated_frame_then_close_leaves_broker_serving(broker, client) -> None:
    await client.send_raw(struct.pack(">i", 100) + b"\x00\x12")
    await client.stream.aclose()
    await _assert_alive(broker)


async def test_truncated_large_frame_then_close_leaves_broker_serving(broker, client) -> None:
    # Large enough to be received into a buffer of its own (broker.server.LARGE_FRAME_BYTES).
    await client.send_raw(struct.pack(">i", 1 << 20) + b"\x00" * 200_000)
    await client.stream.aclose()
    await _assert_alive(broker)


async def test_a_huge_announced_frame_holds_only_the_bytes_sent() -> None:
    # 50 MB announced (under socket.request.max.bytes), 100 KB sent: while the reader waits for the rest, it must
    # hold about what arrived, not the 50 MB announced.
    client, server_end = socket.socketpair()
    reader = FrameReader(NonBlockingSocket(server_end), 100 << 20)
    client.sendall(struct.pack(">i", 50 << 20) + b"\x00" * 100_000)
    tracemalloc.start()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader.next_frame)
            await trio.sleep(0.1)
            held, _ = tracemalloc.get_traced_memory()
            nursery.cancel_scope.cancel()
    finally:
        tracemalloc.stop()
        client.close()
        server_end.close()
    assert held < 4 << 20


async def test_bad_crc_is_corrupt_message_and_nothing_is_appended(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("crc"))
    good = batch([b"a", b"b"])
    bad = bytearray(batch([b"c"]))
    bad[-1] ^= 0xFF
    response = await client.request(ApiKey.PRODUCE, 7, produce_body("crc", 0, good + bytes(bad)))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.CORRUPT_MESSAGE
    latest = await client.request(ApiKey.LIST_OFFSETS, 3, list_offsets_body("crc", 0, -1))
    assert latest.topics[0].partitions[0].offset == 0


async def test_a_clients_control_batch_is_invalid_record_and_nothing_is_appended(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("ctl"))
    marker = encode_batch([SimpleRecord(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")], control=True)
    response = await client.request(ApiKey.PRODUCE, 8, produce_body("ctl", 0, marker))
    partition = response.responses[0].partition_responses[0]
    assert partition.error_code == ErrorCode.INVALID_RECORD
    assert "control records" in partition.error_message
    assert partition.record_errors == []
    latest = await client.request(ApiKey.LIST_OFFSETS, 3, list_offsets_body("ctl", 0, -1))
    assert latest.topics[0].partitions[0].offset == 0


async def test_bad_magic_and_lying_length_are_rejected(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("magic"))
    bad_magic = bytearray(batch([b"a"]))
    bad_magic[16] = 1
    lying = bytearray(batch([b"a"]))
    struct.pack_into(">i", lying, 8, 10_000)
    for records in (bytes(bad_magic), bytes(lying), b"\x00" * 10):
        response = await client.request(ApiKey.PRODUCE, 7, produce_body("magic", 0, records))
        assert response.responses[0].partition_responses[0].error_code in (
            ErrorCode.CORRUPT_MESSAGE,
            ErrorCode.INVALID_RECORD,
        )
    latest = await client.request(ApiKey.LIST_OFFSETS, 3, list_offsets_body("magic", 0, -1))
    assert latest.topics[0].partitions[0].offset == 0


async def test_old_produce_versions_are_unsupported(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("old"))
    response = await client.request(ApiKey.PRODUCE, 2, produce_body("old", 0, b"\x00" * 30))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.UNSUPPORTED_VERSION


async def test_invalid_acks_and_unknown_topic(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("acks"))
    response = await client.request(ApiKey.PRODUCE, 7, produce_body("acks", 0, batch([b"a"]), acks=2))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_REQUIRED_ACKS
    response = await client.request(ApiKey.PRODUCE, 7, produce_body("nope", 0, batch([b"a"])))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    response = await client.request(ApiKey.PRODUCE, 7, produce_body("acks", 5, batch([b"a"])))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_oversized_batch_is_message_too_large(start_broker) -> None:
    broker = await start_broker(message_max_bytes="2000")
    client = await broker.connect()
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("big"))
    response = await client.request(ApiKey.PRODUCE, 7, produce_body("big", 0, batch([b"x" * 5000])))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.MESSAGE_TOO_LARGE


async def test_a_large_frame_not_sent_in_time_closes_the_connection_and_frees_its_reservation(monkeypatch) -> None:
    # The budget a large frame reserves is held while it arrives: one announced and never sent gives it back after
    # LARGE_FRAME_RECEIVE_GRACE_S (plus its size at LARGE_FRAME_MIN_BYTES_PER_S), not after connections.max.idle.ms.
    monkeypatch.setattr(server, "LARGE_FRAME_RECEIVE_GRACE_S", 0.2)
    budget = RequestBudget(4 << 20)
    client, server_end = socket.socketpair()
    reader = FrameReader(NonBlockingSocket(server_end), 100 << 20, budget)
    client.sendall(struct.pack(">i", 1 << 20) + b"\x00" * 1000)
    try:
        with trio.fail_after(5), pytest.raises(server.ConnectionClosed, match="not received within"):
            await reader.next_frame()
        assert budget.reserved == 1 << 20  # until the connection gives it back
        reader.release()
        assert budget.reserved == 0
    finally:
        client.close()
        server_end.close()
