{{- define "fuyao-hub.name" -}}
{{ .Release.Name }}-fuyao-hub
{{- end -}}
{{- define "fuyao-hub.labels" -}}
app.kubernetes.io/name: fuyao-hub
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}
{{- define "fuyao-hub.selector" -}}
app.kubernetes.io/name: fuyao-hub
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{- define "fuyao-hub.check" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.database.existingSecret) -}}
{{- fail "replicas > 1 needs PostgreSQL: set database.existingSecret (SQLite allows one writer)" -}}
{{- end -}}
{{- if lt (int .Values.replicas) 1 -}}
{{- fail "replicas must be at least 1" -}}
{{- end -}}
{{- end -}}
