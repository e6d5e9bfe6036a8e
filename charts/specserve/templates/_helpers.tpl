{{/* Names and labels. */}}
{{- define "specserve.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" }}
{{- end }}

{{- define "specserve.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "specserve.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "specserve.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels; call with (dict "ctx" $ "component" "server"). */}}
{{- define "specserve.selectorLabels" -}}
app.kubernetes.io/name: {{ include "specserve.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "specserve.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "specserve.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* repository:tag, or repository@digest when a digest is pinned. */}}
{{- define "specserve.image" -}}
{{- if .digest }}
{{- printf "%s@%s" .repository .digest }}
{{- else }}
{{- printf "%s:%s" .repository .tag }}
{{- end }}
{{- end }}

{{/*
The effective profile as YAML: values.profile when given (whole, never merged with the default),
else files/profiles/default.yaml; then values.profileOverrides deep-merged over it. A loopback
server.host (the profile library's default, and what profiles use on a shared host) becomes
0.0.0.0: probes, Services and the router reach the pod's own, cluster-internal address.
*/}}
{{- define "specserve.profileYaml" -}}
{{- $base := deepCopy (.Values.profile | default dict) }}
{{- if not $base }}
{{- $base = .Files.Get "files/profiles/default.yaml" | fromYaml }}
{{- end }}
{{- $p := mergeOverwrite $base (deepCopy (.Values.profileOverrides | default dict)) }}
{{- $server := $p.server | default dict }}
{{- if has (toString ($server.host | default "127.0.0.1")) (list "127.0.0.1" "localhost" "::1") }}
{{- $_ := set $server "host" "0.0.0.0" }}
{{- $_ := set $p "server" $server }}
{{- end }}
{{- toYaml $p }}
{{- end }}

{{/* Profile facts, with the profile library's defaults (specserve/profile/model.py). */}}
{{- define "specserve.port" -}}
{{- int (dig "server" "port" 30000 (include "specserve.profileYaml" . | fromYaml)) }}
{{- end }}

{{- define "specserve.gpuCount" -}}
{{- int (dig "gpu" "count" 0 (include "specserve.profileYaml" . | fromYaml)) }}
{{- end }}

{{- define "specserve.logFile" -}}
{{- dig "logging" "file" "" (include "specserve.profileYaml" . | fromYaml) | default "" }}
{{- end }}

{{/* The rotated log's most bytes on disk: max_bytes x (backup_count + 1). */}}
{{- define "specserve.logBudgetBytes" -}}
{{- $p := include "specserve.profileYaml" . | fromYaml }}
{{- mul (add1 (int (dig "logging" "backup_count" 5 $p))) (int64 (dig "logging" "max_bytes" 104857600 $p)) }}
{{- end }}

{{/* "true" when SGLang serves /metrics (server.enable_metrics). */}}
{{- define "specserve.enableMetrics" -}}
{{- if dig "server" "enable_metrics" true (include "specserve.profileYaml" . | fromYaml) }}true{{ end }}
{{- end }}

{{- define "specserve.apiKeyFile" -}}
{{- $key := dig "server" "api_key" dict (include "specserve.profileYaml" . | fromYaml) | default dict }}
{{- $key.file | default "" }}
{{- end }}

{{- define "specserve.apiKeyEnv" -}}
{{- $key := dig "server" "api_key" dict (include "specserve.profileYaml" . | fromYaml) | default dict }}
{{- $key.env | default "" }}
{{- end }}

{{/* Short hash of the download spec: a changed repo list gets a new Job and a new marker. */}}
{{- define "specserve.downloadId" -}}
{{- toJson .Values.model.download.repos | sha256sum | trunc 8 }}
{{- end }}

{{- define "specserve.downloadMarker" -}}
{{- printf "%s/.specserve-download-%s.done" (trimSuffix "/" .Values.model.mountPath) (include "specserve.downloadId" .) }}
{{- end }}

{{/*
Every guardrail the schema cannot express, with the field, the problem and the fix. Rendered
(and so checked) by every template that depends on the profile.
*/}}
{{- define "specserve.validate" -}}
{{- $p := include "specserve.profileYaml" . | fromYaml }}
{{- /* The GPU rule of specserve/profile/checks/parallelism.py, word for word (the pod's GPU
resources come from gpu.count; tests/helm/test_profile_facts_parity.py compares the two). */}}
{{- $par := $p.parallelism | default dict }}
{{- $tp := int ($par.tp | default 1) }}
{{- $dp := int ($par.dp | default 1) }}
{{- $needed := mul $tp $dp }}
{{- $how := "tp x dp" }}
{{- if $par.enable_dp_attention }}{{ $needed = $tp }}{{ $how = "tp" }}{{ end }}
{{- $count := int (include "specserve.gpuCount" .) }}
{{- if and (gt $count 0) (ne $needed $count) }}
{{- fail (printf "profile.parallelism.tp: %s = %d GPUs but gpu.count asks for %d. Fix: make %s equal gpu.count (e.g. tp: %d)" $how $needed $count $how $count) }}
{{- end }}
{{- if and (eq $count 0) (ne $tp 1) }}
{{- fail (printf "profile.parallelism.tp: gpu.count is 0 (CPU stand-in) but tp is %d. Fix: set tp: 1 for the CPU stand-in" $tp) }}
{{- end }}
{{- range $section := list "requests" "limits" }}
{{- if hasKey (get $.Values.server.resources $section | default dict) $.Values.server.gpuResourceName }}
{{- fail (printf "server.resources.%s sets %s: the GPU count comes from profile.gpu.count (checked against tp x dp). Fix: remove it from server.resources and set profile.gpu.count" $section $.Values.server.gpuResourceName) }}
{{- end }}
{{- end }}
{{- if and .Values.exporter.enabled (not (include "specserve.logFile" .)) }}
{{- fail "exporter.enabled follows the SGLang log file, but profile.logging.file is null. Fix: set profile.logging.file (e.g. /var/log/specserve/sglang/sglang.log), or exporter.enabled: false" }}
{{- end }}
{{- if and (or (include "specserve.apiKeyFile" .) (include "specserve.apiKeyEnv" .)) (not .Values.apiKey.existingSecret) }}
{{- fail "profile.server.api_key reads the API key from a secret, but apiKey.existingSecret is empty. Fix: kubectl create secret generic specserve-api-key --from-file=api-key=KEYFILE and set apiKey.existingSecret: specserve-api-key" }}
{{- end }}
{{- with include "specserve.apiKeyFile" . }}
{{- if or (eq (dir .) "/") (hasPrefix "/etc/specserve" .) }}
{{- fail (printf "profile.server.api_key.file %s: its directory is mounted from the Secret and must be a directory of its own, e.g. /run/secrets/specserve/api-key" .) }}
{{- end }}
{{- end }}
{{- with include "specserve.logFile" . }}
{{- if or (eq (dir .) "/") (not (isAbs .)) }}
{{- fail (printf "profile.logging.file %s: the log directory is a volume shared with the exporter and must be an absolute directory of its own, e.g. /var/log/specserve/sglang/sglang.log" .) }}
{{- end }}
{{- end }}
{{- $mount := trimSuffix "/" .Values.model.mountPath }}
{{- $paths := list (list "profile.target.path" (dig "target" "path" "" $p)) }}
{{- with $p.drafter }}{{ with .path }}{{ $paths = append $paths (list "profile.drafter.path" .) }}{{ end }}{{ end }}
{{- range $paths }}
{{- $field := index . 0 }}{{ $path := index . 1 }}
{{- if and (isAbs $path) (not (hasPrefix (printf "%s/" $mount) $path)) }}
{{- fail (printf "%s is %s, outside model.mountPath %s: the model volume would not contain it. Fix: put the model under %s/ or change model.mountPath" $field $path $mount $mount) }}
{{- end }}
{{- if and (eq $.Values.model.storage "download") (isAbs $path) }}
{{- $dirs := list }}
{{- range $.Values.model.download.repos }}{{ $dirs = append $dirs (printf "%s/%s" $mount .dir) }}{{ end }}
{{- if not (has (trimSuffix "/" $path) $dirs) }}
{{- fail (printf "%s is %s but model.download.repos downloads only into %s. Fix: add {repo: ORG/NAME, dir: %s} to model.download.repos" $field $path (join ", " $dirs) (base $path)) }}
{{- end }}
{{- end }}
{{- end }}
{{- if eq .Values.model.storage "existingClaim" }}
{{- if not .Values.model.existingClaim.claimName }}
{{- fail "model.storage is existingClaim but model.existingClaim.claimName is empty. Fix: set it to the PVC that holds the model directories" }}
{{- end }}
{{- else if eq .Values.model.storage "hostPath" }}
{{- if not .Values.model.hostPath.path }}
{{- fail "model.storage is hostPath but model.hostPath.path is empty. Fix: set it to the node directory that holds the model directories" }}
{{- end }}
{{- else if eq .Values.model.storage "download" }}
{{- if not .Values.model.download.repos }}
{{- fail "model.storage is download but model.download.repos is empty. Fix: list [{repo: ORG/NAME, dir: DIR}] for the target and the drafter" }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) (not (has "ReadWriteMany" .Values.model.download.pvc.accessModes)) }}
{{- fail (printf "replicaCount %d reads the downloaded weights from several nodes, but model.download.pvc.accessModes is %s. Fix: use accessModes: [ReadWriteMany] with a storage class that supports it, or model.storage existingClaim / hostPath" (int .Values.replicaCount) (toJson .Values.model.download.pvc.accessModes)) }}
{{- end }}
{{- end }}
{{- if eq .Values.server.strategy.type "RollingUpdate" }}
{{- $surge := dig "rollingUpdate" "maxSurge" 1 .Values.server.strategy }}
{{- if not (or (eq (toString $surge) "0") (eq (toString $surge) "0%")) }}
{{- fail (printf "server.strategy.rollingUpdate.maxSurge is %v: a surge pod needs a whole free GPU node and waits Pending forever on a full one. Fix: maxSurge: 0 with maxUnavailable: 1, or strategy.type: Recreate" $surge) }}
{{- end }}
{{- end }}
{{- if and .Values.serviceMonitor.enabled .Values.podMonitor.enabled }}
{{- fail "serviceMonitor.enabled and podMonitor.enabled would scrape every pod twice (duplicate series). Fix: enable one of them" }}
{{- end }}
{{- /* SGLang's /health_generate (and /health: the same handler unless the profile sets
SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION false) queues a one-token generation and answers 503 only
after SGLANG_HEALTH_CHECK_TIMEOUT, 20 s by default (entrypoints/http_server.py): a probe that
gives up sooner fails a busy, healthy server. */}}
{{- $penv := $p.env | default dict }}
{{- $hcTimeout := int (toString (get $penv "SGLANG_HEALTH_CHECK_TIMEOUT") | default "20") }}
{{- $healthGenerates := not (has (lower (toString (get $penv "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"))) (list "false" "0" "no" "n")) }}
{{- range $name := list "startup" "readiness" "liveness" }}
{{- $probe := get $.Values.server.probes $name }}
{{- if or (eq $probe.path "/health_generate") (and $healthGenerates (eq $probe.path "/health")) }}
{{- if le (int $probe.timeoutSeconds) $hcTimeout }}
{{- fail (printf "server.probes.%s: %s runs a one-token generation in SGLang and answers 503 only after %d s (SGLANG_HEALTH_CHECK_TIMEOUT), but timeoutSeconds is %d: a busy, healthy server would fail the probe. Fix: timeoutSeconds above %d (e.g. %d)%s" $name $probe.path $hcTimeout (int $probe.timeoutSeconds) $hcTimeout (add $hcTimeout 10) (ternary "; or, for liveness, path: /ready (answers at once, generates nothing)" "" (eq $name "liveness"))) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The model volume (pod spec `volumes` entry), named "model". */}}
{{- define "specserve.modelVolume" -}}
- name: model
{{- if eq .Values.model.storage "existingClaim" }}
  persistentVolumeClaim:
    claimName: {{ .Values.model.existingClaim.claimName }}
    readOnly: true
{{- else if eq .Values.model.storage "hostPath" }}
  hostPath:
    path: {{ .Values.model.hostPath.path }}
    {{- with .Values.model.hostPath.type }}
    type: {{ . }}
    {{- end }}
{{- else }}
  persistentVolumeClaim:
    claimName: {{ include "specserve.fullname" . }}-models
    readOnly: true
{{- end }}
{{- end }}

{{/* Pod placement shared by the server and the pods that must see the same node-local data. */}}
{{- define "specserve.placement" -}}
{{- with .Values.server.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.server.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "specserve.exporterFloor" -}}
{{- if kindIs "invalid" .Values.tests.acceptLengthFloor }}
{{- .Values.prometheusRule.alerts.SpecDecodeAcceptLengthLow.thresholds.floor }}
{{- else }}
{{- .Values.tests.acceptLengthFloor }}
{{- end }}
{{- end }}

{{/* A binary-suffixed quantity (Ki Mi Gi) or plain number as an integer number of bytes. */}}
{{- define "specserve.bytes" -}}
{{- $q := toString . }}
{{- $units := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 }}
{{- $out := "" }}
{{- range $suffix, $mult := $units }}
{{- if hasSuffix $suffix $q }}{{ $out = mul (int64 (trimSuffix $suffix $q)) $mult }}{{ end }}
{{- end }}
{{- if eq (toString $out) "" }}{{ $out = int64 $q }}{{ end }}
{{- $out }}
{{- end }}
