"""TLS with a self-signed certificate made here, and the shared token checked at handshake."""

import datetime
import ipaddress

import pytest
from bridge_helpers import actor, serve


def self_signed(tmp_path):
    x509 = pytest.importorskip("cryptography.x509", reason="needs the cryptography package")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def test_tls_and_token(tmp_path):
    cert, key = self_signed(tmp_path)
    server, port = serve(
        tmp_path / "run",
        "total_env_steps=100000000",
        "bridge.token=s3cret",
        f"bridge.tls_cert={cert}",
        f"bridge.tls_key={key}",
    )
    wrong = good = None
    try:
        wrong = actor(port, extra=["--tls-ca", str(cert), "--token", "nope"])
        assert wrong.popen.wait(timeout=120) == 1
        assert any("UNAUTHENTICATED" in line for line in wrong.lines)
        good = actor(port, extra=["--tls-ca", str(cert), "--token", "s3cret"])
        server.wait_for(r"actors 1", 120)
        assert good.alive() and server.alive()
    finally:
        for p in (wrong, good, server):
            if p is not None:
                p.kill()
