"""Fault scenarios 4 and 5: the webhook stopped and started again while a user keeps
submitting, and its serving certificate rotated while it serves.

A stream of submissions runs throughout, over pods that the controller dispatches (one queue,
at most 3 running). With the webhook down every managed pod must be refused (fail closed),
none stored, above all none stored without its gate; once it is back, submissions flow. A
rotation must not fail a single request. Both end with the auditor's verdict over the record.
"""

from __future__ import annotations

import socket
import ssl

from cryptography import x509

from audit.checking import Cap, Limits
from audit.connection import Credentials
from audit.recording import Recorder, recording
from audit.records import Record
from certs.issuing import issue
from controlplane.deploying import LocalSluicegate
from tests.e2e.conftest import eventually
from tests.e2e.faults import DRAIN_SECONDS, Row, Stream, judge, scale, scenario
from tests.e2e.scenes import Scene

WEBHOOK_DOWN = "failed calling webhook"


def created(status: int) -> bool:
    return status == 201


def refused(status: int) -> bool:
    return status != 201


def answered(status: int) -> bool:
    del status
    return True


def world(scene: Scene) -> tuple[str, str, Limits]:
    team = scene.team("vision", maxRunning=4)
    queue = scene.queue("train", maxRunning=3)
    return scene.namespace(team), queue, Limits(queues={queue: Cap(running=3)}, teams={team: Cap(running=4)})


def drain(recorder: Recorder, stream: Stream, row: Row, limits: Limits) -> Record:
    """Once every accepted pod has finished: judge the record and add the verdict to ``row``."""
    accepted = len(stream.accepted)
    recorder.wait(lambda t: t.finished >= accepted, DRAIN_SECONDS)
    record = recorder.snapshot()
    verdict = judge(record, limits)
    row.verdict(verdict)
    verdict.check()
    assert verdict.submitted == accepted
    return record


def test_with_the_webhook_down_a_stream_of_submissions_is_refused_never_stored_ungated_then_flows_again(
    scene: Scene, credentials: Credentials, sluicegate: LocalSluicegate
) -> None:
    namespace, queue, limits = world(scene)
    outages = scale(1, 3)
    with scenario("webhook stopped and restarted under a stream") as row, \
            recording(credentials, selector=scene.selector) as recorder, \
            Stream(credentials, lambda i: scene.pod(namespace, f"s{i:04d}", queue, seconds=1)) as stream:
        for _ in range(outages):
            stream.more(5, created, "submissions to flow")
            sluicegate.stop("webhook")
            try:
                stream.more(5, refused, "submissions to be refused while the webhook is down")
            finally:
                sluicegate.start("webhook")
                row.add("restarts")
        stream.more(5, created, "submissions to flow once the webhook is back")
        stream.stop()
        record = drain(recorder, stream, row, limits)

    assert stream.refused
    assert [s for s in stream.refused if WEBHOOK_DOWN not in s.message] == []
    stored = {pod.name for pod in record.pods.values()}
    assert stored.isdisjoint(s.name for s in stream.refused)  # refused means not stored at all
    assert all(pod.gates for pod in record.pods.values())  # and nothing got in without its gate


def served_serial(port: int) -> int:
    """The serial number of the certificate the webhook serves now."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            context.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_rotating_the_webhooks_certificate_while_it_serves_fails_no_request(
    scene: Scene, credentials: Credentials, sluicegate: LocalSluicegate
) -> None:
    namespace, queue, limits = world(scene)
    port = sluicegate.port("webhook", "admission")
    rotations = scale(2, 5)
    with scenario("webhook certificate rotated while serving") as row, \
            recording(credentials, selector=scene.selector) as recorder, \
            Stream(credentials, lambda i: scene.pod(namespace, f"c{i:04d}", queue, seconds=1)) as stream:
        for _ in range(rotations):
            before = served_serial(port)
            issue(sluicegate.tls.directory, hosts=["127.0.0.1"])  # same CA, new key and certificate
            eventually(lambda old=before: served_serial(port) != old,
                       "the webhook to serve the new certificate", DRAIN_SECONDS)
            row.add("restarts")
            stream.more(5, answered, "submissions after the rotation")
        stream.stop()
        drain(recorder, stream, row, limits)

    assert stream.refused == []
    assert len(stream.accepted) >= rotations * 5
