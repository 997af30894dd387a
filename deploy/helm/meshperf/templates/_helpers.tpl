{{/*
meshperf.labels: the labels of every object's metadata: the kustomize
base's app.kubernetes.io/part-of, and Helm's own two,
meshperf.helmLabels (the tests of deploy/kubernetes strip exactly those
two before comparing with kustomize). The objects of the cert-manager
overlay and of the monitoring component have Helm's alone, as kustomize
labels only the base's.
*/}}
{{- define "meshperf.labels" -}}
app.kubernetes.io/part-of: meshperf
{{ include "meshperf.helmLabels" . }}
{{- end }}

{{- define "meshperf.helmLabels" -}}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* meshperf.image: repository:tag, the tag defaulting to appVersion. */}}
{{- define "meshperf.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* meshperf.imageFields: image, pull policy of a container. */}}
{{- define "meshperf.imageFields" -}}
image: {{ include "meshperf.image" . | quote }}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end }}

{{/*
meshperf.hashName: NAME-HASH as kustomize's configMapGenerator names a
ConfigMap (sigs.k8s.io/kustomize/api v0.21 hasher: sha256 of the JSON of
data, kind and name, the first 10 hex digits with 0, 1, 3, a, e
replaced; its name is always "", as its lookup of metadata/name finds
nothing), so that the chart's ConfigMaps carry the names kustomize gives
them and a change of content rolls the pods. The tests compare the two.
Takes (dict "name" NAME "data" DATA).
*/}}
{{- define "meshperf.hashName" -}}
{{- $enc := dict "kind" "ConfigMap" "name" "" "data" .data | toJson -}}
{{- $h := sha256sum $enc | trunc 10 | replace "0" "g" | replace "1" "h" | replace "3" "k" | replace "a" "m" | replace "e" "t" -}}
{{- printf "%s-%s" .name $h -}}
{{- end }}

{{/* meshperf.coordinatorDNS: the coordinator Service's DNS name. */}}
{{- define "meshperf.coordinatorDNS" -}}
meshperf-coordinator.{{ .Release.Namespace }}.svc
{{- end }}

{{/* meshperf.check: refuses values the schema cannot express. */}}
{{- define "meshperf.check" -}}
{{- $a := .Values.agent.resources -}}
{{- if or (ne (toJson $a.requests) (toJson $a.limits)) (not $a.requests.cpu) (not $a.requests.memory) -}}
{{- fail "agent.resources: requests must equal limits and name cpu and memory (Guaranteed QoS: a starved agent would show as network latency)" -}}
{{- end -}}
{{- if and (or .Values.remoteWrite.bearerTokenSecret.name .Values.remoteWrite.caSecret.name) (not .Values.remoteWrite.url) -}}
{{- fail "remoteWrite.bearerTokenSecret and remoteWrite.caSecret need remoteWrite.url" -}}
{{- end -}}
{{- end }}
