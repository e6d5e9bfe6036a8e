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
{{- $host := dig "server" "host" nil (include "specserve.profileDefaults" . | fromYaml) }}
{{- if hasKey $server "host" }}{{ $host = $server.host }}{{ end }}
{{- if has (toString $host) (list "127.0.0.1" "localhost" "::1") }}
{{- $_ := set $server "host" "0.0.0.0" }}
{{- $_ := set $p "server" $server }}
{{- end }}
{{- toYaml $p }}
{{- end }}

{{/*
The profile library's defaults (files/profile-defaults.yaml, generated from
specserve/profile/fields.py), for a fact the profile leaves out: a template never restates one.
*/}}
{{- define "specserve.profileDefaults" -}}
{{- .Files.Get "files/profile-defaults.yaml" }}
{{- end }}

{{/*
One profile fact, (list $ "section" "name"): the profile's value, or the library's default when
the profile leaves it out; as JSON {"v": value}, as a template returns only text.
*/}}
{{- define "specserve.profileFact" -}}
{{- $root := index . 0 }}
{{- $section := index . 1 }}
{{- $name := index . 2 }}
{{- $default := dig $section $name nil (include "specserve.profileDefaults" $root | fromYaml) }}
{{- toJson (dict "v" (dig $section $name $default (include "specserve.profileYaml" $root | fromYaml))) }}
{{- end }}

{{/* Profile facts, with the profile library's defaults. */}}
{{- define "specserve.port" -}}
{{- int (include "specserve.profileFact" (list . "server" "port") | fromJson).v }}
{{- end }}

{{- define "specserve.gpuCount" -}}
{{- int (dig "gpu" "count" 0 (include "specserve.profileYaml" . | fromYaml)) }}
{{- end }}

{{- define "specserve.logFile" -}}
{{- dig "logging" "file" "" (include "specserve.profileYaml" . | fromYaml) | default "" }}
{{- end }}

{{/* The rotated log's most bytes on disk: max_bytes x (backup_count + 1). */}}
{{- define "specserve.logBudgetBytes" -}}
{{- $backups := (include "specserve.profileFact" (list . "logging" "backup_count") | fromJson).v }}
{{- $bytes := (include "specserve.profileFact" (list . "logging" "max_bytes") | fromJson).v }}
{{- mul (add1 (int $backups)) (int64 $bytes) }}
{{- end }}

{{/* "true" when SGLang serves /metrics (server.enable_metrics). */}}
{{- define "specserve.enableMetrics" -}}
{{- if (include "specserve.profileFact" (list . "server" "enable_metrics") | fromJson).v }}true{{ end }}
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

{{- define "specserve.downloadJobName" -}}
{{- printf "%s-download-%s" (include "specserve.fullname" .) (include "specserve.downloadId" .) }}
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
{{- $dp := int (include "specserve.profileFact" (list . "parallelism" "dp") | fromJson).v }}
{{- $needed := mul $tp $dp }}
{{- $how := "tp x dp" }}
{{- if $par.enable_dp_attention }}{{ $needed = $tp }}{{ $how = "tp" }}{{ end }}
{{- $count := int (include "specserve.gpuCount" .) }}
{{- /* Over several nodes the GPU rule is checks/nodes.py's: specserve.lws.validate. */}}
{{- $single := eq (int (include "specserve.nodeCount" .)) 1 }}
{{- if and $single (gt $count 0) (ne $needed $count) }}
{{- fail (printf "profile.parallelism.tp: %s = %d GPUs but gpu.count asks for %d. Fix: make %s equal gpu.count (e.g. tp: %d)" $how $needed $count $how $count) }}
{{- end }}
{{- if and $single (eq $count 0) (ne $tp 1) }}
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
{{- if and (gt (int (include "specserve.replicasMax" .)) 1) (not (has "ReadWriteMany" .Values.model.download.pvc.accessModes)) }}
{{- fail (printf "%s %d reads the downloaded weights from several nodes, but model.download.pvc.accessModes is %s. Fix: use accessModes: [ReadWriteMany] with a storage class that supports it, or model.storage existingClaim / hostPath" (ternary "autoscaling.maxReplicas" "replicaCount" .Values.autoscaling.enabled) (int (include "specserve.replicasMax" .)) (toJson .Values.model.download.pvc.accessModes)) }}
{{- end }}
{{- end }}
{{- if eq .Values.server.strategy.type "RollingUpdate" }}
{{- $surge := dig "rollingUpdate" "maxSurge" 1 .Values.server.strategy }}
{{- if not (or (eq (toString $surge) "0") (eq (toString $surge) "0%")) }}
{{- fail (printf "server.strategy.rollingUpdate.maxSurge is %v: a surge pod needs a whole free GPU node and waits Pending forever on a full one. Fix: maxSurge: 0 with maxUnavailable: 1, or strategy.type: Recreate" $surge) }}
{{- end }}
{{- $unavailable := dig "rollingUpdate" "maxUnavailable" 1 .Values.server.strategy }}
{{- if has (toString $unavailable) (list "0" "0%") }}
{{- fail "server.strategy.rollingUpdate.maxUnavailable is 0 with maxSurge 0: no pod could ever be replaced (the API server refuses it). Fix: maxUnavailable: 1" }}
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
{{- if and .Values.router.enabled .Values.prometheusRule.enabled (or .Values.serviceMonitor.enabled .Values.podMonitor.enabled) }}
{{- range $alert := list "SpecServeWorkerOutOfRotation" "SpecServeRouterDown" }}
{{- $rule := get $.Values.prometheusRule.alerts $alert | default dict }}
{{- $job := dig "thresholds" "job" "" $rule }}
{{- if and $job (not $rule.disabled) (ne $job $.Values.serviceMonitor.routerJob) }}
{{- fail (printf "prometheusRule.alerts.%s.thresholds.job is %s but the router is scraped as job %s (serviceMonitor.routerJob): the alert would watch nothing. Fix: set both to the same job" $alert $job $.Values.serviceMonitor.routerJob) }}
{{- end }}
{{- end }}
{{- end }}
{{- if .Values.router.enabled }}
{{- $check := .Values.router.healthCheck }}
{{- if or (eq $check.endpoint "/health_generate") (and $healthGenerates (eq $check.endpoint "/health")) }}
{{- if le (int $check.timeoutSeconds) $hcTimeout }}
{{- fail (printf "router.healthCheck: %s runs a one-token generation in SGLang and answers 503 only after %d s (SGLANG_HEALTH_CHECK_TIMEOUT), but timeoutSeconds is %d: the router would take a busy, healthy worker out of rotation. Fix: router.healthCheck.timeoutSeconds above %d (e.g. %d)" $check.endpoint $hcTimeout (int $check.timeoutSeconds) $hcTimeout (add $hcTimeout 10)) }}
{{- end }}
{{- end }}
{{- if and .Values.router.overloadProtection.shed (not .Values.router.overloadProtection.enabled) }}
{{- fail "router.overloadProtection.shed is true but router.overloadProtection.enabled is false: with protection off no worker is ever overloaded, so nothing would be shed. Fix: set enabled: true, or shed: false" }}
{{- end }}
{{- end }}
{{- range $name := list "startup" "readiness" "liveness" }}
{{- $probe := get $.Values.server.probes $name }}
{{- if or (eq $probe.path "/health_generate") (and $healthGenerates (eq $probe.path "/health")) }}
{{- if le (int $probe.timeoutSeconds) $hcTimeout }}
{{- fail (printf "server.probes.%s: %s runs a one-token generation in SGLang and answers 503 only after %d s (SGLANG_HEALTH_CHECK_TIMEOUT), but timeoutSeconds is %d: a busy, healthy server would fail the probe. Fix: timeoutSeconds above %d (e.g. %d)%s" $name $probe.path $hcTimeout (int $probe.timeoutSeconds) $hcTimeout (add $hcTimeout 10) (ternary "; or, for liveness, path: /ready (answers at once, generates nothing)" "" (eq $name "liveness"))) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The most server replicas the release may run: autoscaling.maxReplicas while the autoscaler
owns the count, else replicaCount. What the budget, the rolling update, the anti-affinity and the
shared weights volume must allow for. */}}
{{- define "specserve.replicasMax" -}}
{{- if .Values.autoscaling.enabled }}{{ .Values.autoscaling.maxReplicas }}{{ else }}{{ .Values.replicaCount }}{{ end }}
{{- end }}

{{/*
The server Deployment's strategy. Auto: Recreate for one replica (its GPUs are freed before the
new pod is created, and the node has no room for two), RollingUpdate with maxSurge 0 /
maxUnavailable 1 for several (one node at a time; the others keep serving behind the router).
*/}}
{{- define "specserve.strategy" -}}
{{- if ne .Values.server.strategy.type "Auto" }}
{{- toYaml .Values.server.strategy }}
{{- else if gt (int (include "specserve.replicasMax" .)) 1 }}
{{- toYaml (dict "type" "RollingUpdate" "rollingUpdate" (dict "maxSurge" 0 "maxUnavailable" 1)) }}
{{- else }}
{{- toYaml (dict "type" "Recreate") }}
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

{{/*
==== Multi-node: one server over several nodes (profile nodes.count > 1) ====
Used by templates/leaderworkerset.yaml (and the single-node guards above, deployment.yaml and
the server pod's anti-affinity below). What the ranks do is SGLang's (specserve/profile/nodes.py):
rank 0, the LeaderWorkerSet's leader, serves the API; a rank > 0 serves only a dummy health server.
*/}}
{{- define "specserve.nodeCount" -}}
{{- int (include "specserve.profileFact" (list . "nodes" "count") | fromJson).v }}
{{- end }}

{{/* The rules of specserve/profile/checks/nodes.py, word for word, for nodes.count > 1. */}}
{{- define "specserve.lws.validate" -}}
{{- $p := include "specserve.profileYaml" . | fromYaml }}
{{- $nodes := int (include "specserve.nodeCount" .) }}
{{- $par := $p.parallelism | default dict }}
{{- $tp := int ($par.tp | default 1) }}
{{- $dp := int (include "specserve.profileFact" (list . "parallelism" "dp") | fromJson).v }}
{{- $needed := mul $tp $dp }}
{{- $how := "tp x dp" }}
{{- if or $par.enable_dp_attention (eq $dp 1) }}{{ $how = "tp" }}{{ end }}
{{- if $par.enable_dp_attention }}{{ $needed = $tp }}{{ end }}
{{- $count := int (include "specserve.gpuCount" .) }}
{{- if eq $count 0 }}
{{- if ne $tp $nodes }}
{{- fail (printf "profile.parallelism.tp: gpu.count is 0 (CPU stand-in) over nodes.count %d nodes but tp is %d; the stand-in runs one rank per node. Fix: set tp: %d" $nodes $tp $nodes) }}
{{- end }}
{{- else if ne (mul $nodes $count) $needed }}
{{- $total := mul $nodes $count }}
{{- $fix := printf "%s: %d (the GPUs the nodes give)" $how $total }}
{{- if eq (mod $needed $nodes) 0 }}{{ $fix = printf "gpu.count: %d per node, or %s" (div $needed $nodes) $fix }}{{ end }}
{{- fail (printf "profile.nodes.count: nodes.count x gpu.count = %d x %d = %d GPUs but %s = %d GPUs. Fix: make them equal: %s" $nodes $count $total $how $needed $fix) }}
{{- end }}
{{- if mod $tp $nodes }}
{{- fail (printf "profile.parallelism.tp: tp %d does not divide over nodes.count %d nodes; SGLang asserts tp_size %% nnodes == 0 (\"tp_size must be divisible by number of nodes\"). Fix: make tp a multiple of %d" $tp $nodes $nodes) }}
{{- end }}
{{- if and (gt $dp 1) (not $par.enable_dp_attention) }}
{{- fail (printf "profile.parallelism.dp: dp %d across %d nodes without DP attention; SGLang refuses multi-node data-parallel replicas (only DP attention spans nodes). Fix: set parallelism.enable_dp_attention: true, or dp: 1 (or deploy the replicas as separate single-node servers behind the router)" $dp $nodes) }}
{{- end }}
{{- if and (eq .Values.model.storage "download") (not (has "ReadWriteMany" .Values.model.download.pvc.accessModes)) }}
{{- fail (printf "profile.nodes.count %d reads the downloaded weights on every node, but model.download.pvc.accessModes is %s. Fix: use accessModes: [ReadWriteMany] with a storage class that supports it, or model.storage existingClaim / hostPath" $nodes (toJson .Values.model.download.pvc.accessModes)) }}
{{- end }}
{{- end }}

{{/* The server object's metadata: the Deployment's, or the LeaderWorkerSet's in its place. */}}
{{- define "specserve.serverMetadata" -}}
name: {{ include "specserve.fullname" . }}
namespace: {{ .Release.Namespace }}
labels:
  {{- include "specserve.labels" . | nindent 2 }}
  app.kubernetes.io/component: server
annotations:
  # The SGLang container's exceptions to the strictest context (README "Security context"):
  checkov.io/skip1: CKV_K8S_22=SGLang JIT-compiles kernels (Triton, FlashInfer, torch inductor) into caches under its home (/home/specserve/.cache) and /tmp at start; a read-only root filesystem breaks startup
{{- end }}

{{/*
A server pod's template (metadata and spec): the Deployment's pod (templates/deployment.yaml) and
the LeaderWorkerSet's leader and worker pods (templates/leaderworkerset.yaml) are all this one,
so a pod setting reaches every shape. Call with a dict of what differs between the shapes:
  ctx        the root context
  component  the pod's app.kubernetes.io/component label ("server" is the one the Services, the
             monitors and the router select)
  peers      the component labels of every server pod of the release, kept on separate nodes by
             server.podAntiAffinity
  rankArgs   the launcher is told its rank and rank 0's address: --node-rank $(LWS_WORKER_INDEX)
             --rendezvous-host $(LWS_LEADER_ADDRESS), variables the LWS controller sets in every
             container (kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go),
             expanded by the kubelet
  serves     the pod serves the API: HTTP probes and the preStop drain. An LWS worker (rank > 0)
             does not: its health server is a dummy that answers 200 from the moment its
             schedulers are up, while the leader's /health_generate runs a generation through
             every rank, so a hung worker fails the leader's probes and (restartPolicy
             RecreateGroupOnPodRestart) the whole group is recreated; no Service routes to it,
             so there is nothing to drain
  exporter   the exporter sidecar (with exporter.enabled): only on the pod whose SGLang logs the
             decode lines, rank 0
*/}}
{{- define "specserve.serverPodTemplate" -}}
{{- $ := .ctx -}}
metadata:
  labels:
    {{- include "specserve.labels" $ | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
    {{- with $.Values.server.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    # A profile change rolls the pods: the launcher reads the profile only at start.
    checksum/profile: {{ include "specserve.profileYaml" $ | sha256sum }}
    kubectl.kubernetes.io/default-container: sglang
    {{- with $.Values.server.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  {{- include "specserve.serverPodSpec" . | nindent 2 }}
{{- end }}

{{/*
The DCGM exporter /metrics URL the server pods' GPU check reads (an init container): the user's
dcgmExporter.gpuCheck.url, else the chart's exporter Service, node-local (internalTrafficPolicy
Local); empty, and no check, without either, with the check off, or for a profile without GPUs.
*/}}
{{- define "specserve.gpuCheckUrl" -}}
{{- $c := .Values.dcgmExporter.gpuCheck }}
{{- if and $c.enabled (gt (int (include "specserve.gpuCount" .)) 0) }}
{{- if $c.url }}
{{- $c.url }}
{{- else if .Values.dcgmExporter.enabled }}
{{- printf "http://%s-dcgm-exporter.%s.svc:%v/metrics" (include "specserve.fullname" .) .Release.Namespace .Values.dcgmExporter.port }}
{{- end }}
{{- end }}
{{- end }}

{{/* The spec of specserve.serverPodTemplate; the same dict. */}}
{{- define "specserve.serverPodSpec" -}}
{{- $ := .ctx }}
{{- $gpus := int (include "specserve.gpuCount" $) }}
{{- $logFile := include "specserve.logFile" $ }}
{{- $keyFile := include "specserve.apiKeyFile" $ }}
{{- $keyEnv := include "specserve.apiKeyEnv" $ -}}
serviceAccountName: {{ include "specserve.serviceAccountName" $ }}
automountServiceAccountToken: false
enableServiceLinks: false
{{- if and (gt $gpus 0) $.Values.server.runtimeClassName }}
runtimeClassName: {{ $.Values.server.runtimeClassName }}
{{- end }}
{{- with $.Values.server.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $.Values.server.podSecurityContext | nindent 2 }}
terminationGracePeriodSeconds: {{ $.Values.server.terminationGracePeriodSeconds }}
{{- with (include "specserve.placement" $ | trim) }}
{{- . | nindent 0 }}
{{- end }}
{{- /* Every server pod of the release counts: replicas x ranks. A single-component selector is
the Deployment's own pod selector; the ranks of a LeaderWorkerSet carry two components. */}}
{{- $affinity := deepCopy ($.Values.server.affinity | default dict) }}
{{- $pods := mul (int (include "specserve.replicasMax" $)) (int (include "specserve.nodeCount" $)) }}
{{- if and (gt $pods 1) (ne $.Values.server.podAntiAffinity "none") }}
{{- $selector := dict "matchLabels" (include "specserve.selectorLabels" (dict "ctx" $ "component" (first .peers)) | fromYaml) }}
{{- if gt (len .peers) 1 }}
{{- $component := dict "key" "app.kubernetes.io/component" "operator" "In" "values" .peers }}
{{- $selector = dict "matchLabels" (omit $selector.matchLabels "app.kubernetes.io/component") "matchExpressions" (list $component) }}
{{- end }}
{{- $term := dict "labelSelector" $selector "topologyKey" $.Values.server.antiAffinityTopologyKey }}
{{- $anti := dict }}
{{- if eq $.Values.server.podAntiAffinity "hard" }}
{{- $anti = dict "requiredDuringSchedulingIgnoredDuringExecution" (list $term) }}
{{- else }}
{{- $anti = dict "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" 100 "podAffinityTerm" $term)) }}
{{- end }}
{{- $affinity = merge $affinity (dict "podAntiAffinity" $anti) }}
{{- end }}
{{- with $affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- $gpuCheckUrl := include "specserve.gpuCheckUrl" $ }}
{{- if or (eq $.Values.model.storage "download") $gpuCheckUrl }}
initContainers:
{{- end }}
{{- if eq $.Values.model.storage "download" }}
  # The download Job writes this marker only after `specserve check --require-models`
  # passed on the complete download.
  - name: wait-for-weights
    image: {{ include "specserve.image" $.Values.exporterImage }}
    imagePullPolicy: {{ $.Values.exporterImage.pullPolicy }}
    command:
      - python3
      - -c
      - |
        import os, sys, time
        marker, poll = sys.argv[1], int(sys.argv[2])
        while not os.path.exists(marker):
            print(f"waiting for the model download (job {sys.argv[3]}): no {marker} yet", flush=True)
            time.sleep(poll)
        print(f"weights ready: {marker}", flush=True)
      - {{ include "specserve.downloadMarker" $ }}
      - {{ $.Values.model.download.waitPollSeconds | quote }}
      - {{ include "specserve.downloadJobName" $ }}
    resources:
      requests:
        cpu: 10m
        memory: 32Mi
      limits:
        memory: 64Mi
    securityContext:
      {{- toYaml $.Values.exporter.securityContext | nindent 6 }}
    volumeMounts:
      - name: model
        mountPath: {{ $.Values.model.mountPath }}
        readOnly: true
{{- end }}
{{- if $gpuCheckUrl }}
  # The verify gate's GPU check (docs/gpu-health.md, "The verify gate"), last before the server
  # starts: this node's DCGM exporter must see the profile's gpu.count GPUs, none with a drain
  # XID, uncorrectable ECC errors or a failed row remap. A refusal fails the pod here with the
  # gate's message (kubectl describe shows it), so it never becomes Ready and never serves.
  - name: gpu-check
    image: {{ include "specserve.image" $.Values.exporterImage }}
    imagePullPolicy: {{ $.Values.exporterImage.pullPolicy }}
    command:
      - specserve
      - verify
      - --gpus-only
      - {{ printf "--dcgm=%s" $gpuCheckUrl | quote }}
      - --profile=/etc/specserve/profile.yaml
      - --dcgm-wait={{ $.Values.dcgmExporter.gpuCheck.waitSeconds }}
      - --on=$(NODE_NAME)
      - --knob=dcgm_wait=dcgmExporter.gpuCheck.waitSeconds
    env:
      # The node in the message; $(HOST_IP) for a url on the node's own address.
      - name: NODE_NAME
        valueFrom:
          fieldRef:
            fieldPath: spec.nodeName
      - name: HOST_IP
        valueFrom:
          fieldRef:
            fieldPath: status.hostIP
    terminationMessagePolicy: FallbackToLogsOnError
    resources:
      {{- toYaml $.Values.dcgmExporter.gpuCheck.resources | nindent 6 }}
    securityContext:
      {{- toYaml $.Values.exporter.securityContext | nindent 6 }}
    volumeMounts:
      - name: profile
        mountPath: /etc/specserve
        readOnly: true
{{- end }}
containers:
  - name: sglang
    image: {{ include "specserve.image" $.Values.image }}
    imagePullPolicy: {{ $.Values.image.pullPolicy }}
    # The image's entrypoint is specserve-launch: it validates the profile (refusing e.g.
    # EAGLE with an EAGLE-3 drafter), prints the command and runs SGLang as its child.
    {{- if .rankArgs }}
    # specserve-launch renders this rank's --nnodes / --node-rank / --dist-init-addr.
    args:
      - --node-rank
      - $(LWS_WORKER_INDEX)
      - --rendezvous-host
      - $(LWS_LEADER_ADDRESS)
    {{- end }}
    env:
      - name: SPECSERVE_PROFILE
        value: /etc/specserve/profile.yaml
      {{- if $keyEnv }}
      - name: {{ $keyEnv }}
        valueFrom:
          secretKeyRef:
            name: {{ $.Values.apiKey.existingSecret }}
            key: {{ $.Values.apiKey.key }}
      {{- end }}
      {{- with $.Values.server.extraEnv }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    ports:
      - name: http
        containerPort: {{ include "specserve.port" $ }}
        protocol: TCP
    {{- if .serves }}
    startupProbe:
      httpGet:
        path: {{ $.Values.server.probes.startup.path }}
        port: http
      initialDelaySeconds: {{ $.Values.server.probes.startup.initialDelaySeconds | default 0 }}
      periodSeconds: {{ $.Values.server.probes.startup.periodSeconds }}
      failureThreshold: {{ $.Values.server.probes.startup.failureThreshold }}
      timeoutSeconds: {{ $.Values.server.probes.startup.timeoutSeconds }}
    readinessProbe:
      httpGet:
        path: {{ $.Values.server.probes.readiness.path }}
        port: http
      periodSeconds: {{ $.Values.server.probes.readiness.periodSeconds }}
      failureThreshold: {{ $.Values.server.probes.readiness.failureThreshold }}
      successThreshold: {{ $.Values.server.probes.readiness.successThreshold | default 1 }}
      timeoutSeconds: {{ $.Values.server.probes.readiness.timeoutSeconds }}
    livenessProbe:
      httpGet:
        path: {{ $.Values.server.probes.liveness.path }}
        port: http
      periodSeconds: {{ $.Values.server.probes.liveness.periodSeconds }}
      failureThreshold: {{ $.Values.server.probes.liveness.failureThreshold }}
      timeoutSeconds: {{ $.Values.server.probes.liveness.timeoutSeconds }}
    lifecycle:
      preStop:
        sleep:
          seconds: {{ $.Values.server.preStopSleepSeconds }}
    {{- end }}
    {{- $resources := deepCopy $.Values.server.resources }}
    {{- if gt $gpus 0 }}
    {{- $_ := set $resources "limits" (merge (dict $.Values.server.gpuResourceName $gpus) ($resources.limits | default dict)) }}
    {{- $_ := set $resources "requests" (merge (dict $.Values.server.gpuResourceName $gpus) ($resources.requests | default dict)) }}
    {{- end }}
    resources:
      {{- toYaml $resources | nindent 6 }}
    securityContext:
      {{- toYaml $.Values.server.securityContext | nindent 6 }}
    volumeMounts:
      - name: profile
        mountPath: /etc/specserve
        readOnly: true
      - name: model
        mountPath: {{ $.Values.model.mountPath }}
        readOnly: true
      - name: dshm
        mountPath: /dev/shm
      {{- if $logFile }}
      - name: logs
        mountPath: {{ dir $logFile }}
      {{- end }}
      {{- if $keyFile }}
      - name: api-key
        mountPath: {{ dir $keyFile }}
        readOnly: true
      {{- end }}
      {{- with $.Values.server.extraVolumeMounts }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
  {{- if and .exporter $.Values.exporter.enabled }}
  # Sidecar: follows the size-rotated log file the launcher writes on the shared volume.
  # No Kubernetes API access (the pod-log alternative would need a Role on pods/log).
  - name: exporter
    image: {{ include "specserve.image" $.Values.exporterImage }}
    imagePullPolicy: {{ $.Values.exporterImage.pullPolicy }}
    args:
      - --source
      - file
      - --file
      - {{ $logFile }}
      - --profile
      - /etc/specserve/profile.yaml
      # The profile's baseline must have been measured in the image the server runs.
      - --server-image
      - {{ include "specserve.image" $.Values.image }}
      - --listen-address
      - 0.0.0.0:{{ $.Values.exporter.port }}
      {{- range $.Values.exporter.extraArgs }}
      - {{ . | quote }}
      {{- end }}
    ports:
      - name: metrics
        containerPort: {{ $.Values.exporter.port }}
        protocol: TCP
    readinessProbe:
      httpGet:
        path: /healthz
        port: metrics
      periodSeconds: 10
      timeoutSeconds: 3
    livenessProbe:
      httpGet:
        path: /healthz
        port: metrics
      periodSeconds: 20
      timeoutSeconds: 3
      failureThreshold: 6
    resources:
      {{- toYaml $.Values.exporter.resources | nindent 6 }}
    securityContext:
      {{- toYaml $.Values.exporter.securityContext | nindent 6 }}
    volumeMounts:
      - name: profile
        mountPath: /etc/specserve
        readOnly: true
      - name: logs
        mountPath: {{ dir $logFile }}
        readOnly: true
  {{- end }}
volumes:
  - name: profile
    configMap:
      name: {{ include "specserve.fullname" $ }}-profile
  {{- include "specserve.modelVolume" $ | nindent 2 }}
  - name: dshm
    emptyDir:
      medium: Memory
      sizeLimit: {{ $.Values.server.shm.sizeLimit }}
  {{- if $logFile }}
  - name: logs
    emptyDir:
      # The rotation budget (max_bytes x (backup_count + 1)) plus slack.
      sizeLimit: {{ add (include "specserve.logBudgetBytes" $ | int64) (include "specserve.bytes" $.Values.exporter.logVolumeSlack) }}
  {{- end }}
  {{- if $keyFile }}
  - name: api-key
    secret:
      secretName: {{ $.Values.apiKey.existingSecret }}
      defaultMode: 0440
      items:
        - key: {{ $.Values.apiKey.key }}
          path: {{ base $keyFile }}
  {{- end }}
  {{- with $.Values.server.extraVolumes }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}
