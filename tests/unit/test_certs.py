"""``python -m certs``: a CA and a serving certificate for the webhook Service's names (and the
recorder's, which serves with it), the Secret the Deployment mounts, and webhook configurations
and the records APIService that trust the CA."""

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
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1alpha1.records.sluicegate.dev}
spec:
  group: records.sluicegate.dev
  version: v1alpha1
  service: {name: sluicegate-recorder, namespace: sluicegate-system, port: 8443}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.apps}
spec: {group: apps, version: v1}
"""


def _dns_names(path: Path) -> list[str]:
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    names: list[str] = cert.extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    return names


def test_the_serving_certificate_names_the_three_services_and_localhost_and_the_ca_signed_it(
    tmp_path: Path
) -> None:
    assert main(["webhook", "--dir", str(tmp_path), "--host", "127.0.0.1"]) == 0

    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.crt").read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == [
        "sluicegate-webhook",
        "sluicegate-webhook.sluicegate-system",
        "sluicegate-webhook.sluicegate-system.svc",
        "sluicegate-webhook.sluicegate-system.svc.cluster.local",
        # The recorder serves with this certificate; the aggregation layer checks this name.
        "sluicegate-recorder",
        "sluicegate-recorder.sluicegate-system",
        "sluicegate-recorder.sluicegate-system.svc",
        "sluicegate-recorder.sluicegate-system.svc.cluster.local",
        # So does the controller's visibility API.
        "sluicegate-visibility",
        "sluicegate-visibility.sluicegate-system",
        "sluicegate-visibility.sluicegate-system.svc",
        "sluicegate-visibility.sluicegate-system.svc.cluster.local",
    ]
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    cert.verify_directly_issued_by(ca)
    # Another Service's certificate (the extender's) names that Service alone.
    main(["webhook", "--dir", str(tmp_path / "extender"), "--service", "sluicegate-extender",
          "--secret", "sluicegate-extender-tls"])
    assert _dns_names(tmp_path / "extender" / "tls.crt") == [
        "sluicegate-extender",
        "sluicegate-extender.sluicegate-system",
        "sluicegate-extender.sluicegate-system.svc",
        "sluicegate-extender.sluicegate-system.svc.cluster.local",
    ]


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


def test_bundle_fills_every_webhook_and_the_records_api_and_leaves_other_objects_alone(
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
    bundles = [hook["clientConfig"]["caBundle"] for doc in docs[1:3] for hook in doc["webhooks"]]
    assert bundles == [expected, expected, expected]
    assert docs[3]["spec"]["caBundle"] == expected
    assert docs[4] == yaml.safe_load(CONFIGURATIONS.split("---")[4])  # a built-in API: no service, no CA
