"""``python -m certs``: a CA and a serving certificate for the webhook Service's names, the
Secret the Deployment mounts, and webhook configurations that trust the CA."""

from __future__ import annotations

import base64
import ipaddress
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from certs.__main__ import main

CONFIGURATIONS = """\
apiVersion: v1
kind: Service
metadata: {name: sluicegate-webhook, namespace: sluicegate-system}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: sluicegate}
webhooks:
- name: pods.mutate.sluicegate.dev
  clientConfig: {service: {name: sluicegate-webhook, namespace: sluicegate-system, path: /mutate}}
- name: jobs.mutate.sluicegate.dev
  clientConfig: {service: {name: sluicegate-webhook, namespace: sluicegate-system, path: /mutate}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: sluicegate}
webhooks:
- name: pods.validate.sluicegate.dev
  clientConfig: {service: {name: sluicegate-webhook, namespace: sluicegate-system, path: /validate}}
"""


def test_the_serving_certificate_names_the_service_and_localhost_and_the_ca_signed_it(tmp_path: Path) -> None:
    assert main(["webhook", "--dir", str(tmp_path), "--host", "127.0.0.1"]) == 0

    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.crt").read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == [
        "sluicegate-webhook",
        "sluicegate-webhook.sluicegate-system",
        "sluicegate-webhook.sluicegate-system.svc",
        "sluicegate-webhook.sluicegate-system.svc.cluster.local",
    ]
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    cert.verify_directly_issued_by(ca)


def test_the_secret_holds_the_pair_and_the_ca(tmp_path: Path) -> None:
    main(["webhook", "--dir", str(tmp_path), "--secret", "hook-tls", "--namespace", "gpu-system"])

    secret = yaml.safe_load((tmp_path / "secret.yaml").read_text())
    assert (secret["kind"], secret["type"]) == ("Secret", "kubernetes.io/tls")
    assert secret["metadata"]["name"] == "hook-tls"
    assert secret["metadata"]["namespace"] == "gpu-system"
    for key, file in (("tls.crt", "tls.crt"), ("tls.key", "tls.key"), ("ca.crt", "ca.crt")):
        assert base64.b64decode(secret["data"][key]) == (tmp_path / file).read_bytes()


def test_a_renewed_certificate_keeps_the_ca_so_the_bundle_stays_valid(tmp_path: Path) -> None:
    main(["webhook", "--dir", str(tmp_path)])
    ca, first = (tmp_path / "ca.crt").read_bytes(), (tmp_path / "tls.crt").read_bytes()
    main(["webhook", "--dir", str(tmp_path)])
    assert (tmp_path / "ca.crt").read_bytes() == ca
    assert (tmp_path / "tls.crt").read_bytes() != first

    main(["webhook", "--dir", str(tmp_path), "--new-ca"])
    assert (tmp_path / "ca.crt").read_bytes() != ca


def test_bundle_fills_every_webhook_and_leaves_other_objects_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["webhook", "--dir", str(tmp_path)])
    manifests = tmp_path / "webhooks.yaml"
    manifests.write_text(CONFIGURATIONS)
    capsys.readouterr()

    assert main(["bundle", "--ca", str(tmp_path / "ca.crt"), str(manifests)]) == 0

    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    expected = base64.b64encode((tmp_path / "ca.crt").read_bytes()).decode()
    assert docs[0] == yaml.safe_load(CONFIGURATIONS.split("---")[0])
    bundles = [hook["clientConfig"]["caBundle"] for doc in docs[1:] for hook in doc["webhooks"]]
    assert bundles == [expected, expected, expected]
