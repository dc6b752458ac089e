{{/*
The gateway as a container, and the pieces a pod needs around it. Public: your own chart
includes these in its pod spec (README.md, "Sidecar mode"). Each takes the capgate chart's
context: `.` here, `.Subcharts.capgate` from a parent chart.

  capgate.sidecar.container     one list item: the gateway container (under initContainers when
                                sidecar.native, else under containers)
  capgate.sidecar.volumes       list items: config (projected ConfigMaps), socket dir, tmp, TLS
  capgate.app.volumeMounts      list item: the socket directory, for the app container only
  capgate.app.env               list item: CAPGATE_ADDRESS, the socket URL for gRPC clients
  capgate.pod.securityContext   mapping: the pod securityContext both containers need
*/}}

{{- define "capgate.sidecar.container" -}}
- name: capgate
  image: {{ include "capgate.image" . | quote }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  {{- if and (eq .Values.mode "sidecar") .Values.sidecar.native }}
  restartPolicy: Always
  {{- end }}
  args:
    {{- /* The image's entrypoint is `capgate serve --config /etc/capgate`. */}}
    - --watch-interval={{ .Values.gateway.watchInterval }}
    - --grace={{ .Values.gateway.grace }}
    - --log-level={{ .Values.gateway.logLevel }}
    {{- /* `auto` (the default): one worker per core of the container's CPU limit, when
    there is a TCP listener to share; 1 without a CPU limit (the node's cores are not the
    pod's). Always passed: `capgate serve` alone would default to its own `auto`. */}}
    {{- $workers := 1 }}
    {{- if eq (toString (default "auto" .Values.gateway.workers)) "auto" }}
    {{- if .Values.listeners.tcp }}{{ $workers = int (include "capgate.cpuLimitCores" .) }}{{ end }}
    {{- else }}
    {{- $workers = int .Values.gateway.workers }}
    {{- if and (gt $workers 1) (not .Values.listeners.tcp) }}{{ fail "gateway.workers > 1 needs a listeners.tcp entry: the workers share TCP ports, and the unix-socket listener is served by the first worker only" }}{{ end }}
    {{- end }}
    - --workers={{ $workers }}
    {{- with .Values.actorToken.jwksOut }}
    - --jwks-out={{ . }}
    {{- end }}
  {{- include "capgate.container.env" . | nindent 2 }}
  ports:
    - name: probe
      containerPort: {{ .Values.listeners.probe.port }}
      protocol: TCP
    {{- range (include "capgate.tcpListeners" . | fromJson).items }}
    - name: {{ .name }}
      containerPort: {{ .port }}
      protocol: TCP
    {{- end }}
    {{- if .Values.metrics.enabled }}
    - name: metrics
      containerPort: {{ .Values.metrics.port }}
      protocol: TCP
    {{- end }}
  {{- /* Readiness = config and policies loaded ("capgate"); Redis has its own service name
         ("capgate.redis") that no probe uses, so a Redis blip never takes the pod out. */}}
  startupProbe:
    grpc:
      port: {{ .Values.listeners.probe.port }}
      service: capgate
    periodSeconds: {{ .Values.probes.startup.periodSeconds }}
    failureThreshold: {{ .Values.probes.startup.failureThreshold }}
  livenessProbe:
    grpc:
      port: {{ .Values.listeners.probe.port }}
      service: ""
    periodSeconds: {{ .Values.probes.liveness.periodSeconds }}
    timeoutSeconds: {{ .Values.probes.liveness.timeoutSeconds }}
    failureThreshold: {{ .Values.probes.liveness.failureThreshold }}
  readinessProbe:
    grpc:
      port: {{ .Values.listeners.probe.port }}
      service: capgate
    periodSeconds: {{ .Values.probes.readiness.periodSeconds }}
    timeoutSeconds: {{ .Values.probes.readiness.timeoutSeconds }}
    failureThreshold: {{ .Values.probes.readiness.failureThreshold }}
  securityContext:
    runAsNonRoot: true
    runAsUser: {{ .Values.runAsUser }}
    runAsGroup: {{ .Values.runAsGroup }}
    readOnlyRootFilesystem: true
    allowPrivilegeEscalation: false
    capabilities:
      drop: [ALL]
    seccompProfile:
      type: RuntimeDefault
  {{- with .Values.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  volumeMounts:
    {{- /* A directory, never subPath: a subPath mount never sees ConfigMap updates. */}}
    - name: capgate-config
      mountPath: /etc/capgate
      readOnly: true
    - name: capgate-run
      mountPath: {{ .Values.listeners.local.socketDir }}
    - name: capgate-tmp
      mountPath: /tmp
    {{- range (include "capgate.tcpListeners" . | fromJson).items }}
    {{- if .tls }}
    - name: capgate-tls-{{ .name }}
      mountPath: /etc/capgate-tls/{{ .name }}
      readOnly: true
    {{- end }}
    {{- end }}
    {{- if .Values.actorToken.keySecret.name }}
    - name: capgate-actor-token
      mountPath: /etc/capgate-actor-token
      readOnly: true
    {{- end }}
    {{- range $key, $_ := .Values.secretFiles }}
    - name: capgate-secret-{{ $key }}
      mountPath: /etc/capgate-secrets/{{ $key }}
      readOnly: true
    {{- end }}
{{- end }}

{{- define "capgate.container.env" -}}
env:
  - name: PYTHONDONTWRITEBYTECODE
    value: "1"
  {{- with .Values.redis.url }}
  - name: CAPGATE_REDIS_URL
    {{- if kindIs "string" . }}
    value: {{ . | quote }}
    {{- else }}
    valueFrom:
      secretKeyRef:
        name: {{ .secretKeyRef.name }}
        key: {{ .secretKeyRef.key }}
    {{- end }}
  {{- end }}
  {{- range $name, $ref := .Values.secretEnv }}
  - name: {{ $name }}
    valueFrom:
      secretKeyRef:
        name: {{ $ref.name }}
        key: {{ $ref.key }}
  {{- end }}
  {{- with .Values.env }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}

{{- define "capgate.sidecar.volumes" -}}
- name: capgate-config
  projected:
    {{- /* One projected volume: config files and policies/ swap together in one ..data
           symlink flip, so the gateway never sees half an update. */}}
    sources:
      - configMap:
          name: {{ include "capgate.configMapName" . }}
      {{- if .Values.policies }}
      - configMap:
          name: {{ include "capgate.policiesConfigMapName" . }}
          items:
            {{- range $file, $_ := .Values.policies }}
            - key: {{ $file }}
              path: policies/{{ $file }}
            {{- end }}
      {{- end }}
      {{- range .Values.extraConfigMaps }}
      - configMap:
          name: {{ .name }}
          {{- with .items }}
          items:
            {{- toYaml . | nindent 12 }}
          {{- end }}
      {{- end }}
- name: capgate-run
  emptyDir:
    medium: Memory
    sizeLimit: 1Mi
- name: capgate-tmp
  emptyDir:
    sizeLimit: 64Mi
{{- range (include "capgate.tcpListeners" . | fromJson).items }}
{{- if .tls }}
- name: capgate-tls-{{ .name }}
  secret:
    secretName: {{ .tls.secretName }}
    defaultMode: 0440
{{- end }}
{{- end }}
{{- range $key, $secret := .Values.secretFiles }}
- name: capgate-secret-{{ $key }}
  secret:
    secretName: {{ $secret }}
    defaultMode: 0440
{{- end }}
{{- with .Values.actorToken.keySecret }}
{{- if .name }}
- name: capgate-actor-token
  secret:
    secretName: {{ .name }}
    defaultMode: 0440
    items:
      - key: {{ .key }}
        path: key.pem
{{- end }}
{{- end }}
{{- end }}

{{- define "capgate.app.volumeMounts" -}}
- name: capgate-run
  mountPath: {{ .Values.listeners.local.socketDir }}
{{- end }}

{{- define "capgate.app.env" -}}
- name: CAPGATE_ADDRESS
  value: {{ printf "unix://%s" (include "capgate.socketPath" .) | quote }}
{{- end }}

{{- define "capgate.pod.securityContext" -}}
runAsNonRoot: true
{{- /* fsGroup is a supplementary group of every container in the pod: the app container can
       use the 0660 socket and read the Secret files without running as the gateway's user. */}}
fsGroup: {{ .Values.runAsGroup }}
seccompProfile:
  type: RuntimeDefault
{{- end }}
