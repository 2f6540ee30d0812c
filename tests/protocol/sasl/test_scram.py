"""SCRAM computations and messages against RFC 7677's published SCRAM-SHA-256 exchange (section 3), and PLAIN
tokens (RFC 4616)."""

from __future__ import annotations

import base64

import pytest
from oncelog.protocol.sasl import scram
from oncelog.protocol.sasl.plain import PlainFormatError, encode_plain, parse_plain
from support.scram_vectors import CLIENT_FINAL, CLIENT_FIRST, MECHANISM, SERVER_FINAL, SERVER_FIRST


def test_rfc7677_client_proof_and_server_signature() -> None:
    first = scram.ClientFirst.parse(CLIENT_FIRST)
    server_first = scram.ServerFirst.parse(SERVER_FIRST)
    final = scram.ClientFinal.parse(CLIENT_FINAL)
    assert (first.username, first.nonce, first.authorization_id) == ("user", "rOprNGfwEbeRWgbNEkqO", "")
    assert server_first.iterations == 4096 and server_first.to_str().encode() == SERVER_FIRST
    salted = scram.salted_password(MECHANISM, "pencil", server_first.salt, server_first.iterations)
    message = scram.auth_message(first, server_first, final.without_proof)
    assert scram.client_proof(MECHANISM, salted, message) == final.proof
    signature = scram.server_signature(MECHANISM, scram.server_key(MECHANISM, salted), message)
    assert scram.ServerFinal(signature).to_bytes() == SERVER_FINAL
    # The server's check: the proof recovers exactly the stored key kept for the user.
    credential = scram.ScramCredential.from_password(MECHANISM, "pencil", 4096, server_first.salt)
    assert scram.stored_key_from_proof(MECHANISM, credential, message, final.proof) == credential.stored_key
    wrong = bytes([final.proof[0] ^ 1]) + final.proof[1:]
    assert scram.stored_key_from_proof(MECHANISM, credential, message, wrong) != credential.stored_key


def test_credential_keeps_no_password() -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    salted = scram.salted_password(MECHANISM, "pencil", salt, 4096)
    credential = scram.ScramCredential.from_salted_password(MECHANISM, salt, salted, 4096)
    assert credential == scram.ScramCredential.from_password(MECHANISM, "pencil", 4096, salt)
    assert salted not in (credential.stored_key, credential.server_key)
    assert "pencil" not in repr(credential)


def test_sha512_keys_have_sha512_length() -> None:
    credential = scram.ScramCredential.from_password("SCRAM-SHA-512", "pw", 4096, b"salt")
    assert len(credential.stored_key) == len(credential.server_key) == 64


def test_client_first_with_authzid_extension_and_escapes() -> None:
    first = scram.ClientFirst.parse(b"n,a=a=2Cb,n=a=2Cb,r=abc,tokenauth=true")
    assert (first.username, first.authorization_id, first.nonce) == ("a,b", "a,b", "abc")
    assert first.token_authenticated
    assert first.bare() == "n=a=2Cb,r=abc,tokenauth=true"
    assert scram.ClientFirst("x=y", "n1").to_bytes() == b"n,,n=x=3Dy,r=n1"


@pytest.mark.parametrize(
    "message",
    [
        b"y,,n=user,r=abc",  # channel binding flags other than "n" (Kafka supports none)
        b"p=tls-unique,,n=user,r=abc",
        b"n,,n=us=er,r=abc",  # "=" not followed by 2C/3D
        b"n,,r=abc",
        b"n,,n=user",
        b"\xff",
    ],
)
def test_malformed_client_first_is_refused(message: bytes) -> None:
    with pytest.raises(scram.ScramFormatError):
        scram.ClientFirst.parse(message)


def test_malformed_client_final_is_refused() -> None:
    with pytest.raises(scram.ScramFormatError):
        scram.ClientFinal.parse(b"c=biws,r=abc")  # no proof
    with pytest.raises(scram.ScramFormatError):
        scram.ClientFinal.parse(b"r=abc,p=AAAA")


def test_plain_tokens() -> None:
    assert encode_plain("alice", "s3cret") == b"\0alice\0s3cret"
    token = parse_plain(b"admin\0alice\0s3cret")
    assert (token.authorization_id, token.username, token.password) == ("admin", "alice", "s3cret")
    assert "s3cret" not in repr(token)
    for bad in (b"alice\0s3cret", b"a\0b\0c\0d", b"\xff\0a\0b"):
        with pytest.raises(PlainFormatError):
            parse_plain(bad)
