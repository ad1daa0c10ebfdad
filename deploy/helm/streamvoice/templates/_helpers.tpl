{{- define "streamvoice.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "streamvoice.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "streamvoice.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "streamvoice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "streamvoice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "streamvoice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "streamvoice.speechSelector" -}}
{{ include "streamvoice.selectorLabels" . }}
app.kubernetes.io/component: speech
{{- end -}}

{{- define "streamvoice.agentSelector" -}}
{{ include "streamvoice.selectorLabels" . }}
app.kubernetes.io/component: agent
{{- end -}}

{{- define "streamvoice.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "streamvoice.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Where the pods keep what callers make (values.yaml: store). */}}
{{- define "streamvoice.storeEnv" -}}
{{- if .Values.store.redis.enabled }}
- name: STREAMVOICE_STORE_URL
  value: {{ printf "redis://%s-redis:6379/0" (include "streamvoice.fullname" .) | quote }}
{{- else if .Values.store.existingSecret }}
- name: STREAMVOICE_STORE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.store.existingSecret }}
      key: {{ .Values.store.key }}
{{- else if .Values.store.url }}
- name: STREAMVOICE_STORE_URL
  value: {{ .Values.store.url | quote }}
{{- end }}
{{- end -}}

{{- define "streamvoice.speechImage" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* A pod must outlive its drain, or Kubernetes kills sessions the server is still finishing. */}}
{{- define "streamvoice.checkGrace" -}}
{{- $needed := add .Values.speech.drainTimeoutSeconds .Values.speech.preStopSleepSeconds -}}
{{- if le (int .Values.speech.terminationGracePeriodSeconds) (int $needed) -}}
{{- fail (printf "speech.terminationGracePeriodSeconds (%v) must exceed speech.preStopSleepSeconds + speech.drainTimeoutSeconds (%v)" .Values.speech.terminationGracePeriodSeconds $needed) -}}
{{- end -}}
{{- if not (has .Values.model.source (list "download" "volume")) -}}
{{- fail (printf "model.source must be \"download\" or \"volume\", not %q" .Values.model.source) -}}
{{- end -}}
{{- if and (eq .Values.model.source "volume") (not .Values.model.existingClaim) -}}
{{- fail "model.source=volume needs model.existingClaim: a PVC holding kokoro-v1.0*.onnx and voices-v1.0.bin" -}}
{{- end -}}
{{- end -}}
