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
{{- with (include "capgate.mcpListener" . | fromYaml) }}
  - name: {{ .name }}
    {{- toYaml (omit . "name") | nindent 4 }}
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
The MCP listener (listeners.mcp) as a gateway listener, or nothing when it is off. Always
protocol mcp, auth jwt and the caller role: the only combination the gateway allows on MCP
(docs/mcp.md). Empty settings are left out, so the gateway's defaults apply.
*/}}
{{- define "capgate.mcpListener" -}}
{{- $mcp := .Values.listeners.mcp }}
{{- if $mcp.enabled }}
{{- $jwt := deepCopy $mcp.jwt }}
{{- /* Tokens must be issued for this endpoint: its resource URL is the natural audience. */}}
{{- if and $mcp.resourceUrl (not $jwt.audience) }}{{ $_ := set $jwt "audience" $mcp.resourceUrl }}{{ end }}
{{- $endpoint := dict "path" $mcp.path "approval_tool" $mcp.approvalTool
      "session_idle_timeout" $mcp.sessionIdleTimeout "max_sessions" $mcp.maxSessions }}
{{- with $mcp.resourceUrl }}{{ $_ := set $endpoint "resource_url" . }}{{ end }}
{{- with $mcp.allowedHosts }}{{ $_ := set $endpoint "allowed_hosts" . }}{{ end }}
{{- with $mcp.allowedOrigins }}{{ $_ := set $endpoint "allowed_origins" . }}{{ end }}
{{- with $mcp.authorizationServers }}{{ $_ := set $endpoint "authorization_servers" . }}{{ end }}
{{- with $mcp.toolNames }}{{ $_ := set $endpoint "tool_names" . }}{{ end }}
{{- $listener := dict "name" $mcp.name "address" (printf "0.0.0.0:%v" $mcp.port)
      "surface" $mcp.surface "protocol" "mcp" "auth" "jwt" "jwt" $jwt "mcp" $endpoint }}
{{- if $mcp.tls.secretName }}
{{- $dir := printf "/etc/capgate-tls/%s" $mcp.name }}
{{- $_ := set $listener "tls" (dict "cert_file" (printf "%s/tls.crt" $dir) "key_file" (printf "%s/tls.key" $dir)) }}
{{- end }}
{{- toYaml $listener }}
{{- end }}
{{- end }}

{{/*
The TCP listeners as the chart sees them (listeners.tcp plus the MCP listener when on), each
with name, port and tls: container ports, Service ports, TLS volumes and the NetworkPolicy.
*/}}
{{- define "capgate.tcpListeners" -}}
{{- $all := list }}
{{- range .Values.listeners.tcp }}
{{- $all = append $all (dict "name" .name "port" .port "tls" (.tls | default dict) "appProtocol" "grpc") }}
{{- end }}
{{- with .Values.listeners.mcp }}
{{- if .enabled }}
{{- $tls := dict }}
{{- if .tls.secretName }}{{ $tls = dict "secretName" .tls.secretName }}{{ end }}
{{- $all = append $all (dict "name" .name "port" .port "tls" $tls "appProtocol" "http") }}
{{- end }}
{{- end }}
{{- toJson (dict "items" $all) }}
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

{{/* Checks JSON Schema cannot express: unique listener names and ports, the inbox's admin
listener. */}}
{{- define "capgate.validate" -}}
{{- $ports := dict (toString .Values.listeners.probe.port) "listeners.probe" }}
{{- if .Values.metrics.enabled }}
{{- $port := toString .Values.metrics.port }}
{{- if hasKey $ports $port }}{{ fail (printf "metrics.port %s is already used by %s" $port (get $ports $port)) }}{{ end }}
{{- $_ := set $ports $port "metrics" }}
{{- end }}
{{- $names := dict }}
{{- range (include "capgate.tcpListeners" . | fromJson).items }}
{{- $port := toString .port }}
{{- if hasKey $ports $port }}{{ fail (printf "listener %s: port %s is already used by %s" .name $port (get $ports $port)) }}{{ end }}
{{- $_ := set $ports $port .name }}
{{- if hasKey $names .name }}{{ fail (printf "listeners: the name %s is used twice" .name) }}{{ end }}
{{- $_ := set $names .name true }}
{{- end }}
{{- if and (eq .Values.mode "standalone") .Values.inbox.enabled }}
{{- /* Fails when the inbox has no admin listener to call. */}}
{{- $_ := include "capgate.inbox.adminListener" . }}
{{- end }}
{{- end }}

{{/*
The whole cores of the capgate container's CPU limit (resources.limits.cpu: 2, "1500m", 1.5),
rounded down, at least 1; 1 when there is no CPU limit. gateway.workers: auto uses it.
*/}}
{{- define "capgate.cpuLimitCores" -}}
{{- $cpu := "" -}}
{{- with .Values.resources }}{{ with .limits }}{{ with .cpu }}{{ $cpu = toString . }}{{ end }}{{ end }}{{ end -}}
{{- if not $cpu -}}
1
{{- else if hasSuffix "m" $cpu -}}
{{ max 1 (div (int (trimSuffix "m" $cpu)) 1000) }}
{{- else -}}
{{ max 1 (int (floor (float64 $cpu))) }}
{{- end -}}
{{- end -}}
