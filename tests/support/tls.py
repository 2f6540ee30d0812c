"""Certificates for TLS tests, made on the spot with ``cryptography`` (no network), and a broker on an SSL listener.

``make_pki(directory)`` writes a CA, a server certificate for 127.0.0.1 and localhost signed by it, a client
certificate signed by it, and a second, unrelated CA with a client certificate of its own (a client the broker must
not trust). Every file is PEM unless its name says otherwise; ``server.p12`` is the server's key and chain as a
PKCS12 keystore, ``ca.p12`` the CA as a PKCS12 truststore.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from .broker import BrokerProcess

KEY_PASSWORD = "key-secret"
STORE_PASSWORD = "store-secret"


@dataclass(frozen=True)
class Pki:
    """Paths of the files ``make_pki`` wrote."""

    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def server_keystore(self) -> Path:
        """Server key (unencrypted, PKCS#8) followed by its certificate and the CA's: a PEM keystore file."""
        return self.directory / "server-keystore.pem"

    @property
    def server_cert(self) -> Path:
        return self.directory / "server.crt"

    @property
    def server_key(self) -> Path:
        return self.directory / "server.key"

    @property
    def server_key_encrypted(self) -> Path:
        """The server key encrypted with ``KEY_PASSWORD``."""
        return self.directory / "server-encrypted.key"

    @property
    def server_p12(self) -> Path:
        """PKCS12 keystore of the server, password ``STORE_PASSWORD``."""
        return self.directory / "server.p12"

    @property
    def ca_p12(self) -> Path:
        """PKCS12 truststore holding the CA, password ``STORE_PASSWORD``."""
        return self.directory / "ca.p12"

    @property
    def client_cert(self) -> Path:
        return self.directory / "client.crt"

    @property
    def client_key(self) -> Path:
        return self.directory / "client.key"

    @property
    def rogue_client_cert(self) -> Path:
        """A client certificate from a CA the broker does not trust."""
        return self.directory / "rogue-client.crt"

    @property
    def rogue_client_key(self) -> Path:
        return self.directory / "rogue-client.key"

    def keystore_settings(self) -> dict[str, str]:
        """Broker properties of a PEM keystore file holding key and chain."""
        return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.server_keystore)}

    def mtls_settings(self) -> dict[str, str]:
        """Broker properties requiring client certificates signed by the CA."""
        return {
            **self.keystore_settings(),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca),
            "ssl.client.auth": "required",
        }


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: str,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool,
    server: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        ).add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False).add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False
        )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    encryption = serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def make_pki(directory: Path) -> Pki:
    """Write the test PKI into ``directory`` (created if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(directory)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = _certificate("oncelog test CA", ca_key, "oncelog test CA", ca_key, ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = _certificate("localhost", server_key, "oncelog test CA", ca_key, ca=False, server=True)
    client_key = ec.generate_private_key(ec.SECP256R1())
    client_cert = _certificate("test-client", client_key, "oncelog test CA", ca_key, ca=False)
    rogue_ca_key = ec.generate_private_key(ec.SECP256R1())
    rogue_key = ec.generate_private_key(ec.SECP256R1())
    rogue_cert = _certificate("rogue-client", rogue_key, "rogue CA", rogue_ca_key, ca=False)

    pki.ca.write_bytes(_pem(ca_cert))
    pki.server_cert.write_bytes(_pem(server_cert) + _pem(ca_cert))
    pki.server_key.write_bytes(_key_pem(server_key))
    pki.server_key_encrypted.write_bytes(_key_pem(server_key, KEY_PASSWORD))
    pki.server_keystore.write_bytes(_key_pem(server_key) + _pem(server_cert) + _pem(ca_cert))
    pki.client_cert.write_bytes(_pem(client_cert))
    pki.client_key.write_bytes(_key_pem(client_key))
    pki.rogue_client_cert.write_bytes(_pem(rogue_cert))
    pki.rogue_client_key.write_bytes(_key_pem(rogue_key))
    encryption = serialization.BestAvailableEncryption(STORE_PASSWORD.encode())
    pki.server_p12.write_bytes(
        pkcs12.serialize_key_and_certificates(b"kafka", server_key, server_cert, [ca_cert], encryption)
    )
    pki.ca_p12.write_bytes(pkcs12.serialize_key_and_certificates(b"ca", None, None, [ca_cert], encryption))
    return pki


class TlsBrokerProcess(BrokerProcess):
    """A ``BrokerProcess`` whose one listener is ``SSL://127.0.0.1:port``; pass the ``ssl.*`` settings."""

    def argv(self) -> list[str]:
        argv = super().argv()
        index = argv.index("--listen") + 1
        argv[index] = f"SSL://{argv[index]}"
        return argv
