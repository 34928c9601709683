{{/* vim: set filetype=mustache: */}}

{{/*
The chart's name: "<cloudProvider>-cluster-autoscaler" unless nameOverride
(as upstream's chart, so that names and labels match it).
*/}}
{{- define "cluster-autoscaler.name" -}}
{{- default (printf "%s-%s" .Values.cloudProvider .Chart.Name) .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The objects' name: fullnameOverride, else "<release>-<name>" (just the name
when the release is called that).
*/}}
{{- define "cluster-autoscaler.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "cluster-autoscaler.name" . -}}
{{- if eq $name .Release.Name -}}
{{- $name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
"<chart>-<version>" for the helm.sh/chart label.
*/}}
{{- define "cluster-autoscaler.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The selector labels (the Deployment's selector, the Service's, the PDB's and
the ServiceMonitor's).
*/}}
{{- define "cluster-autoscaler.selectorLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/name: {{ include "cluster-autoscaler.name" . | quote }}
{{- end -}}

{{/*
Every object's labels.
*/}}
{{- define "cluster-autoscaler.labels" -}}
{{ include "cluster-autoscaler.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ include "cluster-autoscaler.chart" . | quote }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The ServiceAccount the pod runs as.
*/}}
{{- define "cluster-autoscaler.serviceAccountName" -}}
{{- if and .Values.rbac.create .Values.rbac.serviceAccount.create -}}
{{- default (include "cluster-autoscaler.fullname" .) .Values.rbac.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.rbac.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
"true" when extraArgs.expander lists the priority expander.
*/}}
{{- define "cluster-autoscaler.priorityExpanderEnabled" -}}
{{- $expanders := splitList "," (toString (default "" .Values.extraArgs.expander)) -}}
{{- if has "priority" $expanders -}}
true
{{- end -}}
{{- end -}}

{{/*
"true" when the Cluster API management cluster is the cluster the pod runs
in (clusterAPIMode incluster-incluster or kubeconfig-incluster): only then
does this chart's ClusterRole get the clusterapi rules.
*/}}
{{- define "cluster-autoscaler.capiManagementInCluster" -}}
{{- if and (eq .Values.cloudProvider "clusterapi") (has .Values.clusterAPIMode (list "incluster-incluster" "kubeconfig-incluster")) -}}
true
{{- end -}}
{{- end -}}

{{/*
The value of --node-group-auto-discovery for clusterapi:
"clusterapi:clusterName=<c>,namespace=<ns>,<label>=<value>,...", from
autoDiscovery.clusterName, .namespace and .labels (a list of one-entry maps);
empty when none is set (every annotated MachineDeployment and MachineSet is
then a node group).
*/}}
{{- define "cluster-autoscaler.capiAutodiscoveryConfig" -}}
{{- $pairs := list -}}
{{- with .Values.autoDiscovery.clusterName -}}
{{- $pairs = append $pairs (printf "clusterName=%s" (tpl (toString .) $)) -}}
{{- end -}}
{{- with .Values.autoDiscovery.namespace -}}
{{- $pairs = append $pairs (printf "namespace=%s" (toString .)) -}}
{{- end -}}
{{- range .Values.autoDiscovery.labels -}}
{{- range $k, $v := . -}}
{{- $pairs = append $pairs (printf "%s=%s" $k (toString $v)) -}}
{{- end -}}
{{- end -}}
{{- if $pairs -}}
clusterapi:{{ join "," $pairs }}
{{- end -}}
{{- end -}}

{{/*
The name of an extraArgs key as a flag: what comes before the first "_"
(as upstream's chart: "balancing-ignore-label_1" and
"balancing-ignore-label_2" are two values of one repeatable flag).
*/}}
{{- define "cluster-autoscaler.flagName" -}}
{{- . | mustRegexFind "^[^_]+" -}}
{{- end -}}

{{/*
The value of the flag `name` in extraArgs, or "" when it is not there.
Call with (dict "name" "..." "args" .Values.extraArgs).
*/}}
{{- define "cluster-autoscaler.extraArg" -}}
{{- $name := .name -}}
{{- range $k, $v := .args -}}
{{- if eq (include "cluster-autoscaler.flagName" $k) $name -}}
{{- toString $v -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The rules of one scope ("clusterrole" or "role") for the cloud provider, as
a YAML list: files/<scope>-rules.yaml followed by
files/<scope>-rules-<cloudProvider>.yaml, the same files (and order) that
deploy/manifests/<provider>.yaml are generated from.
Call with (dict "scope" "clusterrole" "provider" "kwok" "ctx" $).
*/}}
{{- define "cluster-autoscaler.rulesFromFiles" -}}
{{- $common := fromYamlArray (.ctx.Files.Get (printf "files/%s-rules.yaml" .scope)) -}}
{{- $own := list -}}
{{- if .provider -}}
{{- $own = fromYamlArray (.ctx.Files.Get (printf "files/%s-rules-%s.yaml" .scope .provider)) -}}
{{- end -}}
{{- toYaml (concat $common $own) -}}
{{- end -}}

{{/*
Fails on values the chart cannot render correctly.
*/}}
{{- define "cluster-autoscaler.validate" -}}
{{- if not (has .Values.cloudProvider (list "kwok" "clusterapi" "aws")) -}}
{{- fail (printf "cloudProvider=%q: this autoscaler implements kwok, clusterapi and aws" (toString .Values.cloudProvider)) -}}
{{- end -}}
{{- range $flag := list "cloud-provider" "namespace" "address" -}}
{{- range $k, $v := $.Values.extraArgs -}}
{{- if eq (include "cluster-autoscaler.flagName" $k) $flag -}}
{{- fail (printf "extraArgs.%s: the chart sets --%s itself (cloudProvider, the release namespace, port 8085)" $k $flag) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and (eq .Values.cloudProvider "aws") (not (or .Values.autoDiscovery.clusterName .Values.autoscalingGroups)) -}}
{{- fail "cloudProvider=aws needs autoDiscovery.clusterName (auto-discovery by ASG tags) or autoscalingGroups" -}}
{{- end -}}
{{- if and (eq .Values.cloudProvider "clusterapi") (not (has .Values.clusterAPIMode (list "incluster-incluster" "incluster-kubeconfig" "kubeconfig-incluster" "kubeconfig-kubeconfig" "single-kubeconfig"))) -}}
{{- fail (printf "clusterAPIMode=%q: expected incluster-incluster, incluster-kubeconfig, kubeconfig-incluster, kubeconfig-kubeconfig or single-kubeconfig" (toString .Values.clusterAPIMode)) -}}
{{- end -}}
{{- if and .Values.podDisruptionBudget .Values.podDisruptionBudget.minAvailable .Values.podDisruptionBudget.maxUnavailable -}}
{{- fail "podDisruptionBudget: set minAvailable or maxUnavailable, not both" -}}
{{- end -}}
{{- end -}}
