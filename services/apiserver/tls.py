"""A generated certificate authority and a serving certificate signed by it (with the
``cryptography`` package), kept in a directory readable by its owner only. Acts.

The CA is made once (``ca.crt``, ``ca.key``); the serving certificate (``apiserver.crt``,
``apiserver.key``) is made again whenever it lacks a name or address it must serve, so a
kubeconfig holding the CA keeps working across restarts.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import socket
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from services import config

CA_DAYS = 3650
CERT_DAYS = 365


def _key_bytes(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _load_key(path: Path) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return key


def ensure_ca(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    config.private_dir(directory)
    crt, key_path = directory / "ca.crt", directory / "ca.key"
    if crt.exists() and key_path.exists():
        return x509.load_pem_x509_certificate(crt.read_bytes()), _load_key(key_path)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "daemonbus-ca")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                         crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    config.write_private(key_path, _key_bytes(key))
    config.write_private(crt, cert.public_bytes(serialization.Encoding.PEM))
    return cert, key


def _names(bind: str) -> tuple[list[str], list[str]]:
    dns = ["localhost", socket.gethostname()]
    ips = ["127.0.0.1", "::1"]
    try:
        ipaddress.ip_address(bind)
        if bind not in ("0.0.0.0", "::"):
            ips.append(bind)
    except ValueError:
        dns.append(bind)
    return sorted(set(dns)), sorted(set(ips))


def _covers(cert: x509.Certificate, dns: list[str], ips: list[str]) -> bool:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    have_dns = set(san.get_values_for_type(x509.DNSName))
    have_ips = {str(a) for a in san.get_values_for_type(x509.IPAddress)}
    fresh = cert.not_valid_after_utc > dt.datetime.now(dt.UTC) + dt.timedelta(days=7)
    return fresh and set(dns) <= have_dns and set(ips) <= have_ips


def ensure_serving(directory: Path, bind: str) -> tuple[Path, Path, Path]:
    """(CA certificate, serving certificate, its key) for ``bind``, made if needed."""
    ca, ca_key = ensure_ca(directory)
    crt, key_path = directory / "apiserver.crt", directory / "apiserver.key"
    dns, ips = _names(bind)
    if crt.exists() and key_path.exists() and \
            _covers(x509.load_pem_x509_certificate(crt.read_bytes()), dns, ips):
        return directory / "ca.crt", crt, key_path
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    san = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i))
                                             for i in ips]
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                                        "daemonbus-apiserver")]))
            .issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=CERT_DAYS))
            .add_extension(x509.SubjectAlternativeName(san), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    config.write_private(key_path, _key_bytes(key))
    config.write_private(crt, cert.public_bytes(serialization.Encoding.PEM))
    return directory / "ca.crt", crt, key_path


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert), str(key))
    return ctx
