{{/*
The labels Helm's charts carry, added to every object beside the ones manifests/ gives it (the
chart/kustomize comparison forgives exactly these four).
*/}}
{{- define "sluicegate.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* An object's labels: the component's, then Helm's. */}}
{{- define "sluicegate.labels" -}}
app.kubernetes.io/name: sluicegate
app.kubernetes.io/component: {{ .component }}
{{ include "sluicegate.helmLabels" .root }}
{{- end }}

{{/* The pods' selector labels (no Helm labels: a selector cannot change on upgrade). */}}
{{- define "sluicegate.selector" -}}
app.kubernetes.io/name: sluicegate
app.kubernetes.io/component: {{ . }}
{{- end }}

{{- define "sluicegate.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Where the three workloads' pods run (values nodeSelector, tolerations, priorityClassName). */}}
{{- define "sluicegate.placement" -}}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end }}

{{/*
The objects of the files matching .glob (copies of manifests/ written by `make chart`), each with
Helm's labels added and .annotations when given (cert-manager's CA injection on the webhook
configurations and the APIService, Helm's resource policy on the samples); the webhook
configurations and the APIService also get the CA (.caBundle, base64) when given. A document
that does not parse fails the rendering.
*/}}
{{- define "sluicegate.copied" -}}
{{- $root := .root }}
{{- $caBundle := .caBundle | default "" }}
{{- $annotations := .annotations | default dict }}
{{- range $path, $_ := $root.Files.Glob .glob }}
{{- range $text := regexSplit "(?m)^---[ \t]*$" ($root.Files.Get $path) -1 }}
{{- $obj := fromYaml $text }}
{{- if hasKey $obj "Error" }}
{{- fail (printf "%s does not parse: %s" $path (get $obj "Error")) }}
{{- end }}
{{- if hasKey $obj "kind" }}
{{- $meta := $obj.metadata }}
{{- $_ := set $meta "labels" (merge (include "sluicegate.helmLabels" $root | fromYaml) ($meta.labels | default dict)) }}
{{- if $annotations }}
{{- $_ := set $meta "annotations" (merge (deepCopy $annotations) ($meta.annotations | default dict)) }}
{{- end }}
{{- if has $obj.kind (list "MutatingWebhookConfiguration" "ValidatingWebhookConfiguration" "APIService") }}
{{- if $caBundle }}
{{- if eq $obj.kind "APIService" }}
{{- $_ := set $obj.spec "caBundle" $caBundle }}
{{- else }}
{{- range $webhook := $obj.webhooks }}
{{- $_ := set $webhook.clientConfig "caBundle" $caBundle }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
---
{{ toYaml $obj }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* What the webhook configurations and the records APIService carry for the CA. */}}
{{- define "sluicegate.caBundle" -}}
{{- if and (eq .Values.certificates.source "secrets") .Values.certificates.caCert }}
{{- .Values.certificates.caCert | b64enc }}
{{- end }}
{{- end }}
