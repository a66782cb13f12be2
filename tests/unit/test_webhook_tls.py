"""The webhook's TLS: 1.2 or newer only, and a renewed certificate is served without a restart."""

from __future__ import annotations

import shutil
import socket
import ssl
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509

from certs.issuing import WebhookFiles, issue
from process.certificates import ReloadingCertificate
from tests.admission_world import vision_catalog
from tests.webhook_builders import CONTROLLER, FixedSource, ServedApp
from webhook.application import build_app
from webhook.settings import Settings


@pytest.fixture
def files(tmp_path: Path) -> WebhookFiles:
    return issue(tmp_path, hosts=["127.0.0.1"])


@pytest.fixture
def served(files: WebhookFiles) -> Iterator[tuple[ServedApp, ReloadingCertificate]]:
    certificate = ReloadingCertificate(files.cert, files.key)
    app = build_app(Settings(controller=CONTROLLER), FixedSource(vision_catalog()))
    with ServedApp(app, certificate.context) as server:
        yield server, certificate


def served_serial(port: int, ca: Path, *, highest: ssl.TLSVersion | None = None) -> int:
    context = ssl.create_default_context(cafile=str(ca))
    if highest is not None:
        with warnings.catch_warnings():  # naming TLS 1.0 and 1.1 is deprecated, and the point here
            warnings.simplefilter("ignore", DeprecationWarning)
            context.minimum_version = ssl.TLSVersion.TLSv1
            context.maximum_version = highest
        context.set_ciphers("DEFAULT:@SECLEVEL=0")  # this client would speak TLS 1.1
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def file_serial(path: Path) -> int:
    return x509.load_pem_x509_certificate(path.read_bytes()).serial_number


def test_a_renewed_certificate_is_served_to_the_next_connection(
    served: tuple[ServedApp, ReloadingCertificate], files: WebhookFiles
) -> None:
    server, certificate = served
    first = file_serial(files.cert)
    assert served_serial(server.port, files.ca_cert) == first
    assert certificate.check() is False  # nothing changed yet

    issue(files.directory, hosts=["127.0.0.1"])  # same CA, new serving pair
    assert certificate.check() is True

    renewed = file_serial(files.cert)
    assert renewed != first
    assert served_serial(server.port, files.ca_cert) == renewed


def test_a_half_written_pair_is_not_loaded_and_the_old_one_keeps_serving(
    served: tuple[ServedApp, ReloadingCertificate], files: WebhookFiles, tmp_path: Path
) -> None:
    server, certificate = served
    first = file_serial(files.cert)
    other = issue(tmp_path / "other", hosts=["127.0.0.1"])
    shutil.copy(other.key, files.key)  # the new key has arrived, its certificate not yet

    assert certificate.check() is False
    assert served_serial(server.port, files.ca_cert) == first


def test_tls_1_2_is_accepted_and_older_versions_are_refused(
    served: tuple[ServedApp, ReloadingCertificate], files: WebhookFiles
) -> None:
    server, _ = served
    tls_1_2 = served_serial(server.port, files.ca_cert, highest=ssl.TLSVersion.TLSv1_2)
    assert tls_1_2 == file_serial(files.cert)
    with pytest.raises(ssl.SSLError, match=r"PROTOCOL_VERSION|UNEXPECTED_EOF"):  # the server hangs up
        served_serial(server.port, files.ca_cert, highest=ssl.TLSVersion.TLSv1_1)
