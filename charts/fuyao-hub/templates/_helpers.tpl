{{- define "fuyao-hub.labels" -}}
app.kubernetes.io/name: fuyao-hub
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}
{{- define "fuyao-hub.selector" -}}
app.kubernetes.io/name: fuyao-hub
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
