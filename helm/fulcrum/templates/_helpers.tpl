{{/* Names and labels shared by every object of the chart. */}}
{{- define "fulcrum.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name: "fulcrum" for a release named fulcrum, else RELEASE-fulcrum. */}}
{{- define "fulcrum.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "fulcrum.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fulcrum.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "fulcrum.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "fulcrum.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "fulcrum.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "fulcrum.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "fulcrum.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "fulcrum.trainerImage" -}}
{{- printf "%s:%s" .Values.trainerImage.repository (default .Chart.AppVersion .Values.trainerImage.tag) -}}
{{- end -}}

{{- define "fulcrum.trainerCudaImage" -}}
{{- printf "%s:%s" .Values.trainerCudaImage.repository (default .Chart.AppVersion .Values.trainerCudaImage.tag) -}}
{{- end -}}

{{/* The selector-less Service trainers dial; the leader points its EndpointSlice at itself. */}}
{{- define "fulcrum.coordinatorService" -}}
{{- printf "%s-coordinator" (include "fulcrum.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The Secret with the coordinator's CA and serving certificate (the operator makes it). */}}
{{- define "fulcrum.coordinatorTlsSecret" -}}
{{- printf "%s-coordinator-tls" (include "fulcrum.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The Lease replicas campaign for. */}}
{{- define "fulcrum.leaseName" -}}
{{- include "fulcrum.fullname" . -}}
{{- end -}}
