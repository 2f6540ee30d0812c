"""The broker's SASL pieces without sockets: mechanism servers (RFC 7677's exchange replayed), the SCRAM credential
store (KIP-554's rules, durability), JAAS parsing, listener parsing and start-up checks."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from oncelog.broker.config import BrokerConfig, ConfigError
from oncelog.broker.listeners import Endpoint, Listener, parse_advertised, parse_listeners, parse_protocol_map
from oncelog.broker.node import BrokerNode
from oncelog.broker.sasl import mechanisms
from oncelog.broker.sasl.add_scram import add_scram_users, parse_spec
from oncelog.broker.sasl.credentials import Deletion, ScramCredentialStore, Upsertion
from oncelog.broker.sasl.jaas import parse_jaas_config
from oncelog.broker.sasl.mechanisms import PlainServer, SaslFailure, ScramServer
from oncelog.protocol import ErrorCode
from oncelog.protocol.sasl import scram
from support.scram_vectors import CLIENT_FINAL, CLIENT_FIRST, SERVER_FINAL, SERVER_FIRST

SHA256, SHA512 = 1, 2
PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'


def _store(tmp_path: Path) -> ScramCredentialStore:
    store = ScramCredentialStore(tmp_path)
    store.load()
    return store


def _upsert(name: str, mechanism: int = SHA256, iterations: int = 4096, password: str = "pw") -> Upsertion:
    salt = b"salt-" + name.encode()
    mech_name = scram.MECHANISM_BY_TYPE.get(mechanism, "SCRAM-SHA-256")
    return Upsertion(name, mechanism, iterations, salt, scram.salted_password(mech_name, password, salt, iterations))


# ------------------------------------------------------------------------------------------------ mechanism servers
def test_scram_server_replays_rfc7677(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(tmp_path)
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    store.set("user", "SCRAM-SHA-256", scram.ScramCredential.from_password("SCRAM-SHA-256", "pencil", 4096, salt))
    monkeypatch.setattr(mechanisms, "new_nonce", lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    server = ScramServer("SCRAM-SHA-256", store)
    assert server.evaluate(CLIENT_FIRST) == SERVER_FIRST
    assert not server.complete
    assert server.evaluate(CLIENT_FINAL) == SERVER_FINAL
    assert server.complete and server.authorization_id == "user"


def test_scram_server_refuses_a_wrong_proof(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(tmp_path)
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    store.set("user", "SCRAM-SHA-256", scram.ScramCredential.from_password("SCRAM-SHA-256", "not-pencil", 4096, salt))
    monkeypatch.setattr(mechanisms, "new_nonce", lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    server = ScramServer("SCRAM-SHA-256", store)
    server.evaluate(CLIENT_FIRST)
    with pytest.raises(SaslFailure) as failure:
        server.evaluate(CLIENT_FINAL)
    assert not failure.value.visible and not server.complete
    with pytest.raises(SaslFailure):  # a failed server takes no more tokens
        server.evaluate(CLIENT_FINAL)


def test_scram_server_refuses_a_proof_that_is_not_whole_base64(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.set("user", "SCRAM-SHA-256", scram.ScramCredential.from_password("SCRAM-SHA-256", "pencil", 4096, b"salt"))
    server = ScramServer("SCRAM-SHA-256", store)
    nonce = scram.ServerFirst.parse(server.evaluate(CLIENT_FIRST)).nonce
    with pytest.raises(SaslFailure, match="Invalid base64"):  # a SASL_AUTHENTICATION_FAILED answer, not a crash
        server.evaluate(f"c=biws,r={nonce},p=AAAAA".encode())
    assert not server.complete


@pytest.mark.parametrize(
    ("first", "visible"),
    [
        (b"n,,n=nobody,r=abc", False),  # unknown user: the generic message only
        (b"n,,n=user,r=abc,tokenauth=true", False),  # delegation tokens do not exist here
        (b"n,a=other,n=user,r=abc", True),  # Kafka tells the client this one
        (b"y,,n=user,r=abc", False),
    ],
)
def test_scram_server_first_message_failures(tmp_path: Path, first: bytes, visible: bool) -> None:
    store = _store(tmp_path)
    store.set("user", "SCRAM-SHA-256", scram.ScramCredential.from_password("SCRAM-SHA-256", "pencil", 4096))
    with pytest.raises(SaslFailure) as failure:
        ScramServer("SCRAM-SHA-256", store).evaluate(first)
    assert failure.value.visible is visible


def test_scram_server_knows_credentials_per_mechanism(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.set("user", "SCRAM-SHA-256", scram.ScramCredential.from_password("SCRAM-SHA-256", "pencil", 4096))
    with pytest.raises(SaslFailure):
        ScramServer("SCRAM-SHA-512", store).evaluate(b"n,,n=user,r=abc")


def test_plain_server() -> None:
    assert PlainServer({"alice": "alice-secret"}).evaluate(b"\0alice\0alice-secret") == b""
    ok = PlainServer({"alice": "alice-secret"})
    ok.evaluate(b"alice\0alice\0alice-secret")
    assert ok.complete and ok.authorization_id == "alice"
    for token, visible in (
        (b"\0alice\0wrong", False),
        (b"\0bob\0alice-secret", False),
        (b"\0alice\0", False),
        (b"\0\0alice-secret", False),
        (b"alice-secret", False),
        (b"admin\0alice\0alice-secret", True),
    ):
        server = PlainServer({"alice": "alice-secret"})
        with pytest.raises(SaslFailure) as failure:
            server.evaluate(token)
        assert failure.value.visible is visible and not server.complete
        assert "alice-secret" not in str(failure.value)


# ------------------------------------------------------------------------------------------------ credential store
def test_alter_then_describe_and_reload(tmp_path: Path) -> None:
    store = _store(tmp_path)
    results = store.alter([], [_upsert("alice", SHA256, 4096), _upsert("bob", SHA512, 8192)])
    assert [(r["user"], r["error_code"]) for r in results] == [("alice", 0), ("bob", 0)]
    store.alter([], [_upsert("alice", SHA512, 16384)])
    described = _store(tmp_path).describe(None)  # a new store reads what the old one wrote
    assert described == [
        {
            "user": "alice",
            "error_code": 0,
            "error_message": None,
            "credential_infos": [{"mechanism": SHA256, "iterations": 4096}, {"mechanism": SHA512, "iterations": 16384}],
        },
        {
            "user": "bob",
            "error_code": 0,
            "error_message": None,
            "credential_infos": [{"mechanism": SHA512, "iterations": 8192}],
        },
    ]
    text = (tmp_path / "scram-credentials.json").read_text()
    assert "pw" not in json.dumps(json.loads(text)["users"]["alice"]).replace("salt", "")
    assert base64.b64encode(_upsert("alice", SHA512, 16384).salted_password).decode() not in text
    reloaded = _store(tmp_path)
    stored = reloaded.get("alice", "SCRAM-SHA-512")
    expected = scram.ScramCredential.from_salted_password(
        "SCRAM-SHA-512", b"salt-alice", _upsert("alice", SHA512, 16384).salted_password, 16384
    )
    assert stored == expected


def test_alter_rules_follow_kafka(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.alter([], [_upsert("carol")])
    results = store.alter(
        [Deletion("dave", SHA256), Deletion("carol", SHA512), Deletion("erin", 7), Deletion("", SHA256)],
        [
            _upsert("frank", iterations=4095),
            _upsert("grace", iterations=16385),
            _upsert("heidi", mechanism=0),
            _upsert("ivan"),
            _upsert("ivan"),
        ],
    )
    by_user = {r["user"]: (r["error_code"], r["error_message"]) for r in results}
    assert by_user == {
        "dave": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "carol": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "erin": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "frank": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "grace": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "heidi": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "ivan": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
    }
    assert [r["user"] for r in store.describe(None)] == ["carol"]  # nothing else was stored
    results = store.alter([Deletion("carol", SHA256)], [])
    assert results == [{"user": "carol", "error_code": 0, "error_message": None}]
    assert store.describe(None) == [] and _store(tmp_path).describe(None) == []


def test_describe_rules_follow_kafka(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.alter([], [_upsert("alice")])
    results = store.describe(["alice", "nobody", "alice"])
    assert [(r["user"], r["error_code"], r["error_message"]) for r in results] == [
        (
            "alice",
            ErrorCode.DUPLICATE_RESOURCE,
            "Cannot describe SCRAM credentials for the same user twice in a single request: alice",
        ),
        ("nobody", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: nobody"),
    ]


def test_a_failed_write_changes_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path / "missing-dir")  # its file cannot be written
    with pytest.raises(OSError):
        store.alter([], [_upsert("alice")])
    assert store.describe(None) == []


def test_add_scram_command_specs(tmp_path: Path) -> None:
    spec = parse_spec("SCRAM-SHA-512=[name=alice,password=alice-secret,iterations=8192]")
    assert (spec.mechanism, spec.name, spec.password, spec.iterations) == (
        "SCRAM-SHA-512",
        "alice",
        "alice-secret",
        8192,
    )
    assert "alice-secret" not in repr(spec)
    for bad in (
        "SCRAM-SHA-1=[name=a,password=b]",
        "SCRAM-SHA-256=[name=a]",
        "SCRAM-SHA-256=[name=a,password=b,iterations=100]",
        "alice:secret",
    ):
        with pytest.raises(ValueError) as error:
            parse_spec(bad)
        assert "secret" not in str(error.value) or bad == "alice:secret"
    add_scram_users(tmp_path / "data", [spec])
    stored = _store(tmp_path / "data").get("alice", "SCRAM-SHA-512")
    assert stored is not None and stored.iterations == 8192
    assert stored == scram.ScramCredential.from_password("SCRAM-SHA-512", "alice-secret", 8192, stored.salt)


# ------------------------------------------------------------------------------------------------ JAAS
def test_jaas_parsing() -> None:
    entry = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule Required username="admin" '
        'password="a \\"quoted\\" ; secret" user_admin=plain-word user_bob="";'
    )
    assert entry.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert entry.flag == "required"
    assert entry.options == {
        "username": "admin",
        "password": 'a "quoted" ; secret',
        "user_admin": "plain-word",
        "user_bob": "",
    }
    assert "secret" not in repr(entry)
    for bad in (
        "Module required",  # no ';'
        "Module mandatory;",  # not a flag
        'Module required a="x"; Other required;',  # two modules
        'Module required a="unterminated;',
        "Module required a=;",
        "",
    ):
        with pytest.raises(ConfigError):
            parse_jaas_config(bad)


# ------------------------------------------------------------------------------------------------ listeners
def test_listener_parsing() -> None:
    protocols = parse_protocol_map("PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CLIENT:SASL_PLAINTEXT")
    listeners = parse_listeners("PLAINTEXT://127.0.0.1:9092, client://:9093,SASL_PLAINTEXT://[::1]:0", protocols)
    assert listeners == [
        Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092),
        Listener("CLIENT", "SASL_PLAINTEXT", "0.0.0.0", 9093),
        Listener("SASL_PLAINTEXT", "SASL_PLAINTEXT", "::1", 0),
    ]
    assert parse_listeners("127.0.0.1:9092", protocols) == [Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092)]
    advertised = parse_advertised("CLIENT://kafka.example:19093,host-a:1", listeners)
    assert advertised == {
        "CLIENT": Endpoint("kafka.example", 19093, "CLIENT"),
        "PLAINTEXT": Endpoint("host-a", 1, "PLAINTEXT"),
    }
    tls = parse_listeners("SSL://h:1,SASL_SSL://h:2", {"SSL": "SSL", "SASL_SSL": "SASL_SSL"})
    assert [(lst.uses_tls, lst.uses_sasl) for lst in tls] == [(True, False), (True, True)]
    for text in ("A://h:1", "PLAINTEXT://h:1,PLAINTEXT://h:2", "PLAINTEXT://h:1,CLIENT://h:1", "", "PLAINTEXT://h"):
        with pytest.raises((ConfigError, ValueError)):
            parse_listeners(text, {**protocols, "SSL": "SSL"})
    for text in ("OTHER://h:1", "CLIENT://0.0.0.0:1", "CLIENT://a:1,CLIENT://b:2"):
        with pytest.raises(ConfigError):
            parse_advertised(text, listeners)
    with pytest.raises(ConfigError):
        parse_protocol_map("A:TLS")


def _node(tmp_path: Path, **values: str) -> BrokerNode:
    return BrokerNode(BrokerConfig.from_sources({"log.dirs": str(tmp_path), **values}))


def test_sasl_start_up_checks(tmp_path: Path) -> None:
    sasl = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}
    with pytest.raises(ConfigError, match="GSSAPI"):  # Kafka's default mechanism is not implemented
        _node(tmp_path, **sasl)
    with pytest.raises(ConfigError, match=r"plain\.sasl\.jaas\.config is not set"):
        _node(tmp_path, **sasl, **{"sasl.enabled.mechanisms": "PLAIN"})
    with pytest.raises(ConfigError, match="does not serve PLAIN"):
        _node(
            tmp_path,
            **sasl,
            **{
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS.replace("plain.Plain", "scram.Scram"),
            },
        )
    with pytest.raises(ConfigError, match="unknown property"):
        _node(tmp_path, **{"listener.name.sasl_plaintext.connections.max.reauth.ms": "0"})
    node = _node(
        tmp_path,
        listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        **{
            "sasl.enabled.mechanisms": "GSSAPI",  # overridden for the one SASL listener
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "scram-sha-512,PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        },
    )
    assert node.sasl["SASL_PLAINTEXT"].mechanisms == ("SCRAM-SHA-512", "PLAIN")
    assert node.sasl["SASL_PLAINTEXT"].plain_passwords == {"alice": "alice-secret"}
    assert "alice-secret" not in repr(node.sasl["SASL_PLAINTEXT"])
    assert set(node.sasl) == {"SASL_PLAINTEXT"}


def test_the_old_listen_and_advertise_flags_still_work(tmp_path: Path) -> None:
    from oncelog.broker.cli import build_parser, resolve_config

    args = build_parser().parse_args(
        ["broker", "--data-dir", str(tmp_path), "--listen", "0.0.0.0:0", "--advertise", "localhost:9999"]
    )
    node = BrokerNode(resolve_config(args))
    assert node.listeners == [Listener("PLAINTEXT", "PLAINTEXT", "0.0.0.0", 0)]
    assert node.advertised_for("PLAINTEXT") == Endpoint("localhost", 9999, "PLAINTEXT")
    args = build_parser().parse_args(
        [
            "broker",
            "--data-dir",
            str(tmp_path),
            "--listen",
            "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "--set",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        ]
    )
    node = BrokerNode(resolve_config(args))
    assert [listener.name for listener in node.listeners] == ["PLAINTEXT", "INTERNAL"]
    node.bound_ports.update({"PLAINTEXT": 1234, "INTERNAL": 5678})  # as run() fills them once bound
    assert node.advertised_for("INTERNAL") == Endpoint("127.0.0.1", 5678, "INTERNAL")
    assert node.advertised == Endpoint("127.0.0.1", 1234, "PLAINTEXT")
