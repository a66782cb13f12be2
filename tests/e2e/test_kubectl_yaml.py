"""kubectl, Go's YAML reader, reads every string the project writes back as that string: names,
label values, annotations and data that some reader could take for a number, a boolean or null
(``8e51``, ``0o17``, ``y``, ``~``...), written by ``process.kubeyaml``.

A random run id once went into a label value as ``8e51``; PyYAML wrote it plain and kubectl
refused the object ("cannot unmarshal number into Go struct field ObjectMeta.metadata.labels
of type string"). Here kubectl decodes the YAML and the API server validates it (a server-side
dry run, so nothing is stored) and answers with the object as JSON, whose strings say exactly
what kubectl read.
"""

from __future__ import annotations

import json
import re
from typing import Final

from process import kubeyaml
from tests.e2e.conftest import Kubectl
from tests.yaml_readers import MISREAD_AS_OTHER

# What Kubernetes accepts as a label value and as a ConfigMap key (apimachinery's validation).
LABEL_VALUE: Final = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
CONFIGMAP_KEY: Final = re.compile(r"[-._a-zA-Z0-9]+")


def test_kubectl_reads_every_string_that_looks_like_a_number_boolean_or_null_as_that_string(
    kubectl: Kubectl,
) -> None:
    labels = {f"case-{i}": text for i, text in enumerate(MISREAD_AS_OTHER) if LABEL_VALUE.fullmatch(text)}
    annotations = {f"sluicegate-test/case-{i}": text for i, text in enumerate(MISREAD_AS_OTHER)}
    data = {text: text for text in MISREAD_AS_OTHER if CONFIGMAP_KEY.fullmatch(text)}
    config_map = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "8e51", "namespace": kubectl.namespace, "labels": labels,
                     "annotations": annotations},
        "data": data,
    }
    assert "8e51" in labels.values() and "0o17" in data and "y" in data  # the cases are all there

    written = kubeyaml.dump(config_map)
    answer = kubectl.run("create", "--dry-run=server", "-o", "json", "-f", "-", input=written)

    read = json.loads(answer)
    assert read["metadata"]["name"] == "8e51"
    assert read["metadata"]["labels"] == labels
    assert {k: v for k, v in read["metadata"]["annotations"].items() if k in annotations} == annotations
    assert read["data"] == data
