{{/*
The chart name, or nameOverride.
*/}}
{{- define "ragdrift.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of every object: fullnameOverride, else <release>-<name>, or
the release name alone when it already contains the name. 63 characters at
most (DNS label).
*/}}
{{- define "ragdrift.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Chart name and version, for the helm.sh/chart label.
*/}}
{{- define "ragdrift.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every object.
*/}}
{{- define "ragdrift.labels" -}}
helm.sh/chart: {{ include "ragdrift.chart" . }}
{{ include "ragdrift.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ragdrift
{{- end }}

{{/*
Labels that select the agent's pods (immutable once deployed).
*/}}
{{- define "ragdrift.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ragdrift.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "ragdrift.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ragdrift.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "ragdrift.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
Where the Kafka SASL password secret is mounted, and the file the agent reads.
*/}}
{{- define "ragdrift.kafkaSecretDir" -}}
/var/run/secrets/ragdrift/kafka
{{- end }}

{{- define "ragdrift.kafkaPasswordFile" -}}
{{ include "ragdrift.kafkaSecretDir" . }}/sasl_plain_password
{{- end }}

{{/*
The agent's configuration file: .Values.config, plus the path of the Kafka
SASL password file when secrets.kafkaSaslPassword names a Secret.
*/}}
{{- define "ragdrift.config" -}}
{{- $config := deepCopy (.Values.config | default dict) }}
{{- if .Values.secrets.kafkaSaslPassword.existingSecret }}
{{- $kafka := $config.kafka | default dict }}
{{- $client := $kafka.client | default dict }}
{{- /* the password key of the client library the configuration chooses */ -}}
{{- $key := ternary "sasl.password_file" "sasl_plain_password_file" (eq ($kafka.library | default "kafka-python") "confluent-kafka") }}
{{- $_ := set $client $key (include "ragdrift.kafkaPasswordFile" .) }}
{{- $_ = set $kafka "client" $client }}
{{- $_ = set $config "kafka" $kafka }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{/*
The agent's environment: secrets referenced in .Values.secrets, then extraEnv.
*/}}
{{- define "ragdrift.env" -}}
{{- $secrets := .Values.secrets }}
{{- with $secrets.storeUrl.existingSecret }}
- name: RAGDRIFT_STORE__URL
  valueFrom:
    secretKeyRef: {name: {{ . | quote }}, key: {{ $secrets.storeUrl.key | quote }}}
{{- end }}
{{- with $secrets.labelStudioToken.existingSecret }}
- name: {{ dig "judgment" "label_studio" "token_env" "LABEL_STUDIO_TOKEN" $.Values.config }}
  valueFrom:
    secretKeyRef: {name: {{ . | quote }}, key: {{ $secrets.labelStudioToken.key | quote }}}
{{- end }}
{{- with $secrets.judgmentSalt.existingSecret }}
- name: RAGDRIFT_JUDGMENT__SALT
  valueFrom:
    secretKeyRef: {name: {{ . | quote }}, key: {{ $secrets.judgmentSalt.key | quote }}}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The metrics port: the agent's config.metrics.port (default 9108).
*/}}
{{- define "ragdrift.metricsPort" -}}
{{- dig "metrics" "port" 9108 .Values.config | int }}
{{- end }}

{{/*
HTTPS when the agent serves its metrics port with TLS (config.metrics.tls).
*/}}
{{- define "ragdrift.metricsScheme" -}}
{{- if dig "metrics" "tls" "cert_file" "" .Values.config }}HTTPS{{ else }}HTTP{{ end }}
{{- end }}

{{/*
"true" when the store is SQLite: the URL in config.store.url (the agent's
default when unset), unless secrets.storeUrl supplies it (then it must be
PostgreSQL, which the chart cannot check).
*/}}
{{- define "ragdrift.sqlite" -}}
{{- if not .Values.secrets.storeUrl.existingSecret }}
{{- hasPrefix "sqlite" (dig "store" "url" "sqlite:///ragdrift-state.db" .Values.config) }}
{{- end }}
{{- end }}

{{/*
Refuse settings that cannot work. With autoscaling the HorizontalPodAutoscaler
sets the replica count, up to autoscaling.maxReplicas.
*/}}
{{- define "ragdrift.validate" -}}
{{- $a := .Values.autoscaling }}
{{- $replicas := int .Values.replicaCount }}
{{- $setting := printf "replicaCount %d" $replicas }}
{{- $single := "replicaCount to 1" }}
{{- if $a.enabled }}
{{- $replicas = int $a.maxReplicas }}
{{- $setting = printf "autoscaling (up to maxReplicas %d)" $replicas }}
{{- $single = "autoscaling.enabled to false" }}
{{- end }}
{{- if and (or $a.enabled (gt $replicas 1)) (eq (include "ragdrift.sqlite" .) "true") }}
{{- fail (printf "%s needs PostgreSQL: SQLite serves one replica. Set config.store.url to postgresql+psycopg://... or secrets.storeUrl.existingSecret, or %s." $setting $single) }}
{{- end }}
{{- if $a.enabled }}
{{- $partitions := int $a.partitions }}
{{- if gt $replicas $partitions }}
{{- fail (printf "autoscaling.maxReplicas %d is above autoscaling.partitions %d: a replica past the partition count owns no partition and idles. Lower maxReplicas, or add partitions to the topic and raise autoscaling.partitions." $replicas $partitions) }}
{{- end }}
{{- if gt (int $a.minReplicas) $replicas }}
{{- fail (printf "autoscaling.minReplicas %d is above autoscaling.maxReplicas %d." (int $a.minReplicas) $replicas) }}
{{- end }}
{{- end }}
{{- $p := .Values.persistence }}
{{- if and (gt $replicas 1) $p.enabled (not $p.existingClaim) (not (has "ReadWriteMany" $p.accessModes)) }}
{{- fail (printf "%s mounts one volume in every pod (judgment batches are written by whichever replica builds them): set persistence.accessModes to [ReadWriteMany], persistence.existingClaim to a claim all pods can mount, or persistence.enabled to false (an emptyDir: batches last as long as their pod)." $setting) }}
{{- end }}
{{- end }}
