#!/usr/bin/env python3
"""Node certificates b10d --issue-node-cert does not make, for the tests of certificates mode.

    mkcert.py CA_DIR NAME OUT_DIR [--key ed25519|p256] [--from DAYS] [--days DAYS]
              [--san dns|uri] [--ca] [--key-usage USAGE,...]

Signs with CA_DIR/ca.key and ca.crt (b10d --make-ca) a certificate for NAME,
valid from DAYS (negative: in the past) for --days, its key Ed25519 or ECDSA
P-256, naming NAME by a dNSName or a SPIFFE-style URI. Its basicConstraints say
CA:FALSE, or CA:TRUE with --ca; --key-usage adds a critical keyUsage of those
named (cryptography's names: digital_signature, key_cert_sign, crl_sign, ...),
as a careless CA might issue a node. Writes OUT_DIR/NAME.key (0600) and
OUT_DIR/NAME.crt.
"""
import argparse
import datetime
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import NameOID

# x509.KeyUsage's arguments, all of them (encipher_only and decipher_only need key_agreement).
KEY_USAGES = ("digital_signature", "content_commitment", "key_encipherment", "data_encipherment",
              "key_agreement", "key_cert_sign", "crl_sign", "encipher_only", "decipher_only")

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ca_dir")
    ap.add_argument("name")
    ap.add_argument("out_dir")
    ap.add_argument("--key", choices=("ed25519", "p256"), default="ed25519")
    ap.add_argument("--from", dest="start", type=float, default=-1)
    ap.add_argument("--days", type=float, default=30)
    ap.add_argument("--san", choices=("dns", "uri"), default="dns")
    ap.add_argument("--ca", action="store_true")
    ap.add_argument("--key-usage", default="")
    a = ap.parse_args()
    usages = [u for u in a.key_usage.split(",") if u]
    for u in usages:
        if u not in KEY_USAGES:
            ap.error(f"--key-usage {u}: one of {', '.join(KEY_USAGES)}")

    with open(os.path.join(a.ca_dir, "ca.crt"), "rb") as f:
        ca = x509.load_pem_x509_certificate(f.read())
    with open(os.path.join(a.ca_dir, "ca.key"), "rb") as f:
        ca_key = serialization.load_pem_private_key(f.read(), password=None)
    key = ed25519.Ed25519PrivateKey.generate() if a.key == "ed25519" else \
        ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    start = now + datetime.timedelta(days=a.start)
    san = x509.DNSName(a.name) if a.san == "dns" else \
        x509.UniformResourceIdentifier("spiffe://test.cluster/b10d/" + a.name)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, a.name)]))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + datetime.timedelta(days=a.days))
            .add_extension(x509.BasicConstraints(ca=a.ca, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([san]), critical=False))
    if usages:
        cert = cert.add_extension(x509.KeyUsage(**{u: u in usages for u in KEY_USAGES}),
                                  critical=True)
    cert = cert.sign(ca_key, None if isinstance(ca_key, ed25519.Ed25519PrivateKey)
                     else hashes.SHA256())
    path = os.path.join(a.out_dir, a.name + ".key")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    with open(os.path.join(a.out_dir, a.name + ".crt"), "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))


if __name__ == "__main__":
    main()
