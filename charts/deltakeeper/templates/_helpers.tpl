{{/* Names and labels shared by every template. */}}

{{- define "deltakeeper.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name; names every namespaced object of the chart. */}}
{{- define "deltakeeper.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "deltakeeper.selectorLabels" -}}
app.kubernetes.io/name: {{ include "deltakeeper.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "deltakeeper.labels" -}}
{{ include "deltakeeper.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "deltakeeper.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "deltakeeper.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Cluster-scoped objects are shared by every release: their names carry the namespace too. */}}
{{- define "deltakeeper.clusterName" -}}
{{- printf "%s-%s" .Release.Namespace (include "deltakeeper.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "deltakeeper.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The kopf peering object's name; the operator uses this name (handlers.PEERING). */}}
{{- define "deltakeeper.peeringName" -}}deltakeeper{{- end -}}

{{/* "true" when the monitoring.coreos.com object `kind` is on: its value, else whether the
cluster serves the API. */}}
{{- define "deltakeeper.monitoringOn" -}}
{{- $v := index .Values .kind -}}
{{- if kindIs "bool" $v.enabled -}}
{{- $v.enabled -}}
{{- else -}}
{{- .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" -}}
{{- end -}}
{{- end -}}

{{/* What the operator does where tables live (the same in a Role and in the ClusterRole):
README.md says why each verb is needed. */}}
{{- define "deltakeeper.tableRules" -}}
# Watched by kopf (list, watch). patch: kopf puts its finalizer on each policy (its timer
# needs one) and removes from tables the finalizer earlier versions added.
- apiGroups: [deltakeeper.io]
  resources: [deltatables, deltamaintenancepolicies]
  verbs: [list, watch, patch]
# The operator writes DeltaTable status; kopf writes the policies' status (tables governed).
- apiGroups: [deltakeeper.io]
  resources: [deltatables/status, deltamaintenancepolicies/status]
  verbs: [patch]
# Compaction jobs, each a SparkApplication in its DeltaTable's namespace (an owner reference
# and a secretKeyRef cannot cross namespaces): created, found again by label after a restart,
# read for their state, deleted past their deadline.
- apiGroups: [sparkoperator.k8s.io]
  resources: [sparkapplications]
  verbs: [create, get, list, delete]
# Credentials named by spec.storage.secretRef, read one by one.
- apiGroups: [""]
  resources: [secrets]
  verbs: [get]
# Events on DeltaTables, posted by kopf (core v1; it never patches or reads them).
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- if .Values.discovery.enabled }}
# discovery.enabled: DeltaLakes are watched (patch: kopf's finalizer housekeeping, as on
# tables), their status written, and their DeltaTables made by server-side apply, which
# creates a table the first time (create) and patches it after (patch, above).
- apiGroups: [deltakeeper.io]
  resources: [deltalakes]
  verbs: [list, watch, patch]
- apiGroups: [deltakeeper.io]
  resources: [deltalakes/status]
  verbs: [patch]
- apiGroups: [deltakeeper.io]
  resources: [deltatables]
  verbs: [create]
{{- end }}
{{- end -}}
