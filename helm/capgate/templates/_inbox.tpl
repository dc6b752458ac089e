{{/*
The approver inbox (`capgate inbox`, docs/inbox.md), standalone mode only: names, labels, the
admin listener it calls and its config file. Its pods carry their own app.kubernetes.io/name,
so the gateway's Service, PodDisruptionBudget and NetworkPolicy never select them.
*/}}

{{- define "capgate.inbox.fullname" -}}
{{- printf "%s-inbox" (include "capgate.fullname" . | trunc 57 | trimSuffix "-") }}
{{- end }}

{{- define "capgate.inbox.selectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-inbox" (include "capgate.name" . | trunc 57 | trimSuffix "-") }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "capgate.inbox.labels" -}}
helm.sh/chart: {{ include "capgate.chart" . }}
{{ include "capgate.inbox.selectorLabels" . }}
app.kubernetes.io/component: inbox
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The listeners.tcp entry the inbox calls (JSON): inbox.adminListener, else the first with
role admin. Fails when there is none: ApprovalAdmin is served only on admin listeners. */}}
{{- define "capgate.inbox.adminListener" -}}
{{- $wanted := .Values.inbox.adminListener }}
{{- $found := dict }}
{{- range .Values.listeners.tcp }}
{{- if and (not $found) (eq (.role | default "caller") "admin") (or (not $wanted) (eq .name $wanted)) }}
{{- $found = . }}
{{- end }}
{{- end }}
{{- if not $found }}
{{- if $wanted }}
{{- fail (printf "inbox.adminListener %s: no listeners.tcp entry of that name with role admin" $wanted) }}
{{- else }}
{{- fail "inbox.enabled needs a listeners.tcp entry with role: admin (the inbox calls ApprovalAdmin there)" }}
{{- end }}
{{- end }}
{{- toJson $found }}
{{- end }}

{{/* host:port of the admin listener through the gateway's Service. */}}
{{- define "capgate.inbox.adminAddress" -}}
{{- $admin := include "capgate.inbox.adminListener" . | fromJson }}
{{- printf "%s.%s.svc:%v" (include "capgate.fullname" .) .Release.Namespace $admin.port }}
{{- end }}

{{/* The inbox config file: inbox.config plus the keys the chart owns, listen, admin.address
and redis. Secrets stay "{{ env.NAME }}" references (the values schema refuses literals). */}}
{{- define "capgate.inbox.config" -}}
{{- $config := deepCopy (.Values.inbox.config | default dict) }}
{{- $admin := get $config "admin" | default dict }}
{{- /* The admin listener is another pod's and the inbox's token decides on behalf of
       approvers: TLS, or a mesh that encrypts said so (ADR 0033; the inbox refuses too). */}}
{{- if not (or (hasKey $admin "tls") (eq (get $admin "allow_plaintext" | toString) "true")) }}
{{- fail "inbox.config.admin needs tls (the admin listener is another pod's; the inbox's token decides on behalf of approvers) or, inside a mesh that encrypts pod to pod, allow_plaintext: true (ADR 0033)" }}
{{- end }}
{{- $_ := set $admin "address" (include "capgate.inbox.adminAddress" .) }}
{{- $_ := set $config "admin" $admin }}
{{- $_ := set $config "listen" (printf "0.0.0.0:%v" .Values.inbox.port) }}
{{- /* Sign-in sessions live in Redis: with redis.url every inbox replica shares the gateway's
       Redis (the URL from the same source, as the env var CAPGATE_REDIS_URL), so a session
       started on one replica is valid on all. Without it each pod runs a private embedded
       redis-server, which the values schema allows for one replica only. */}}
{{- if .Values.redis.url }}
{{- $_ := set $config "redis" (dict "url" "{{ env.CAPGATE_REDIS_URL }}" "key_prefix" .Values.redis.keyPrefix) }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{/* The inbox reads its config once at start: a change to it, or to what it references,
rolls the inbox pods. */}}
{{- define "capgate.inbox.checksum" -}}
{{- $inputs := dict "config" (include "capgate.inbox.config" .) "secretEnv" .Values.inbox.secretEnv
      "secretFiles" .Values.inbox.secretFiles "image" .Values.image }}
{{- toJson $inputs | sha256sum }}
{{- end }}
