{{/*
Names, labels and the config the chart writes itself. Every helper takes the chart's context:
`.` inside this chart, `.Subcharts.capgate` from a parent chart that depends on this one.
*/}}

{{- define "capgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "capgate.fullname" -}}
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

{{- define "capgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "capgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "capgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "capgate.labels" -}}
helm.sh/chart: {{ include "capgate.chart" . }}
{{ include "capgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "capgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "capgate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "capgate.image" -}}
{{- $repo := .Values.image.repository }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repo .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "capgate.configMapName" -}}
{{- printf "%s-config" (include "capgate.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "capgate.policiesConfigMapName" -}}
{{- printf "%s-policies" (include "capgate.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* "true" when some policy files are mounted under /etc/capgate/policies. */}}
{{- define "capgate.hasPolicies" -}}
{{- $has := gt (len .Values.policies) 0 }}
{{- range .Values.extraConfigMaps }}
{{- range (.items | default list) }}
{{- if hasPrefix "policies/" .path }}{{ $has = true }}{{ end }}
{{- end }}
{{- end }}
{{- if $has }}true{{ end }}
{{- end }}

{{- define "capgate.socketPath" -}}
{{- printf "%s/capgate.sock" (.Values.listeners.local.socketDir | trimSuffix "/") }}
{{- end }}

{{/* "true" when the local (trusted-local unix socket) listener is rendered. */}}
{{- define "capgate.localEnabled" -}}
{{- if and (eq .Values.mode "sidecar") .Values.listeners.local.enabled }}true{{ end }}
{{- end }}

{{/*
The chart-owned part of the gateway config (00-chart.yaml): version, listeners, redis and
policies. The user's `config` goes to a second file; a directory config merges both
(lists concatenate, mappings merge), so the two never define the same key.
*/}}
{{- define "capgate.chartConfig" -}}
version: 1
listeners:
  - name: probe
    address: {{ printf "0.0.0.0:%v" .Values.listeners.probe.port | quote }}
    surface: probe
    auth: none
{{- if include "capgate.localEnabled" . }}
{{- $local := .Values.listeners.local }}
  - name: local
    address: {{ printf "unix://%s" (include "capgate.socketPath" .) | quote }}
    surface: {{ $local.surface | quote }}
    auth: trusted-local
    socket_mode: {{ $local.socketMode | quote }}
    trusted_local:
      issuer: {{ $local.issuer | quote }}
      allow_anonymous: {{ $local.allowAnonymous }}
{{- end }}
{{- range .Values.listeners.tcp }}
{{- $listener := omit . "port" "tls" }}
{{- $_ := set $listener "address" (printf "0.0.0.0:%v" .port) }}
{{- with .tls }}
{{- $dir := printf "/etc/capgate-tls/%s" $listener.name }}
{{- $tls := dict "cert_file" (printf "%s/tls.crt" $dir) "key_file" (printf "%s/tls.key" $dir) }}
{{- if .clientCA }}{{ $_ := set $tls "client_ca_file" (printf "%s/ca.crt" $dir) }}{{ end }}
{{- $_ := set $listener "tls" $tls }}
{{- end }}
  - name: {{ $listener.name }}
    {{- toYaml (omit $listener "name") | nindent 4 }}
{{- end }}
{{- if .Values.redis.url }}
redis:
  url: "{{ "{{" }} env.CAPGATE_REDIS_URL {{ "}}" }}"
  key_prefix: {{ .Values.redis.keyPrefix | quote }}
{{- end }}
{{- if include "capgate.hasPolicies" . }}
policies:
  paths: [policies]
{{- end }}
{{- if or .Values.metrics.enabled .Values.actorToken.keySecret.name }}
{{- /* Keys the user's config may not set (the schema refuses them there). */}}
{{- if .Values.metrics.enabled }}
telemetry:
  prometheus_address: {{ printf "0.0.0.0:%v" .Values.metrics.port | quote }}
{{- end }}
{{- if .Values.actorToken.keySecret.name }}
actor_token:
  key_file: /etc/capgate-actor-token/key.pem
{{- end }}
{{- end }}
{{- end }}

{{/*
A hash of what only a restart applies (listeners, environment, Secret references, flags):
changing it rolls the pods. Capabilities and policies are not in it: they hot-reload.
*/}}
{{- define "capgate.restartChecksum" -}}
{{- $inputs := dict "listeners" .Values.listeners "env" .Values.env "secretEnv" .Values.secretEnv
      "redis" .Values.redis "actorToken" .Values.actorToken "gateway" .Values.gateway
      "metrics" .Values.metrics "image" .Values.image }}
{{- toJson $inputs | sha256sum }}
{{- end }}

{{/* Checks JSON Schema cannot express: unique listener names and ports. */}}
{{- define "capgate.validate" -}}
{{- $ports := dict (toString .Values.listeners.probe.port) "listeners.probe" }}
{{- if .Values.metrics.enabled }}
{{- $port := toString .Values.metrics.port }}
{{- if hasKey $ports $port }}{{ fail (printf "metrics.port %s is already used by %s" $port (get $ports $port)) }}{{ end }}
{{- $_ := set $ports $port "metrics" }}
{{- end }}
{{- $names := dict }}
{{- range .Values.listeners.tcp }}
{{- $port := toString .port }}
{{- if hasKey $ports $port }}{{ fail (printf "listeners.tcp %s: port %s is already used by %s" .name $port (get $ports $port)) }}{{ end }}
{{- $_ := set $ports $port .name }}
{{- if hasKey $names .name }}{{ fail (printf "listeners.tcp: the name %s is used twice" .name) }}{{ end }}
{{- $_ := set $names .name true }}
{{- end }}
{{- end }}
