{{/* The chart's name, shortened to 63 characters (a label value). */}}
{{- define "reconsume.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name: the prefix of every object's name. */}}
{{- define "reconsume.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "reconsume.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "reconsume.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels of the operator's pods, stable over upgrades (the Deployment's selector).
     The component is "controller": the brokers the operator runs are labelled
     app.kubernetes.io/name=reconsume too, with components namesrv and broker. */}}
{{- define "reconsume.selectorLabels" -}}
app.kubernetes.io/name: {{ include "reconsume.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{/* The selector labels as key=value pairs separated by commas (RECONSUME_OPERATOR_POD_LABELS). */}}
{{- define "reconsume.selectorLabelPairs" -}}
{{- $pairs := list -}}
{{- range $key, $value := include "reconsume.selectorLabels" . | fromYaml -}}
{{- $pairs = append $pairs (printf "%s=%s" $key $value) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{- define "reconsume.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "reconsume.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: reconsume
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "reconsume.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "reconsume.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* repository:tag (tag defaulting to appVersion), or repository@digest. */}}
{{- define "reconsume.image" -}}
{{- $image := index . 0 -}}
{{- $root := index . 1 -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default $root.Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Whether the operator watches the whole cluster. */}}
{{- define "reconsume.clusterwide" -}}
{{- if not .Values.watchNamespaces -}}true{{- end -}}
{{- end -}}

{{/* The chart refuses combinations the schema cannot express. */}}
{{- define "reconsume.validate" -}}
{{- if and (not .Values.peering.enabled) (gt (int .Values.replicaCount) 1) -}}
{{- fail "replicaCount: more than one replica needs peering.enabled (without peering every replica would act)" -}}
{{- end -}}
{{- if and .Values.rbac.create .Values.rbac.sparkOperator (not .Values.rbac.sparkOnKubernetes) -}}
{{- fail "rbac.sparkOperator needs rbac.sparkOnKubernetes: a SparkApplication's driver gets the ServiceAccount, Role and RoleBinding those rights allow" -}}
{{- end -}}
{{- if ne (len .Values.watchNamespaces) (len (uniq .Values.watchNamespaces)) -}}
{{- fail (printf "watchNamespaces: %v names a namespace twice" .Values.watchNamespaces) -}}
{{- end -}}
{{- end -}}
