{{/* Pod-level fields shared by the standalone Deployment and the example app Deployment. */}}
{{- define "capgate.pod.common" -}}
serviceAccountName: {{ include "capgate.serviceAccountName" . }}
{{- /* The gateway never calls the Kubernetes API: no token in the pod. */}}
automountServiceAccountToken: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- /* Longer than the gateway's drain, plus the 10 s it may wait for outcomes still being
recorded (ADR 0034), so in-flight calls finish and are recorded before SIGKILL. */}}
terminationGracePeriodSeconds: {{ add .Values.gateway.grace 15 }}
securityContext:
  {{- include "capgate.pod.securityContext" . | nindent 2 }}
{{- end }}

{{- define "capgate.pod.annotations" -}}
capgate.dev/restart-checksum: {{ include "capgate.restartChecksum" . }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end }}
