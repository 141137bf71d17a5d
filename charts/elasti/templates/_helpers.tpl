{{/*
Object names are fixed, equal to manifests/ and to KubeElasti's (with the
release name "elasti"): the operator and the resolver find each other by
them (ELASTI_* env), and an existing KubeElasti install is adopted in place.
*/}}
{{- define "elasti.operatorName" -}}elasti-operator-controller-manager{{- end }}
{{- define "elasti.resolverName" -}}elasti-resolver{{- end }}

{{/* Helm's own labels, on every object's metadata, never on selectors or pods. */}}
{{- define "elasti.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The labels that identify each component, as manifests/ sets them. */}}
{{- define "elasti.operatorLabels" -}}
app.kubernetes.io/name: elasti-operator
app.kubernetes.io/part-of: elasti
{{- end }}
{{- define "elasti.resolverLabels" -}}
app: elasti-resolver
app.kubernetes.io/part-of: elasti
{{- end }}

{{/*
elasti.metadata renders name, namespace, labels and annotations.
Arguments (a dict): ctx (the root context), name, namespace (omitted for
cluster-scoped objects when clusterScoped is true), base (a YAML string of
the component's labels; they win over the user's, so selectors keep
matching), labels and annotations (lists of user maps, lowest priority
first).
*/}}
{{- define "elasti.metadata" -}}
{{- $ctx := .ctx -}}
{{- $labels := dict -}}
{{- range .labels }}{{- $labels = mergeOverwrite $labels (deepCopy (. | default dict)) -}}{{- end }}
{{- $labels = mergeOverwrite $labels (include "elasti.helmLabels" $ctx | fromYaml) (.base | fromYaml) -}}
{{- $annotations := dict -}}
{{- range .annotations }}{{- $annotations = mergeOverwrite $annotations (deepCopy (. | default dict)) -}}{{- end }}
name: {{ .name }}
{{- if not .clusterScoped }}
namespace: {{ .namespace | default $ctx.Release.Namespace }}
{{- end }}
labels:
  {{- toYaml $labels | nindent 2 }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Operator object metadata: global and operator common labels. */}}
{{- define "elasti.operatorMeta" -}}
{{- $v := .ctx.Values -}}
{{- include "elasti.metadata" (dict "ctx" .ctx "name" .name "namespace" .namespace "clusterScoped" .clusterScoped
  "base" (.base | default (include "elasti.operatorLabels" .ctx))
  "labels" (concat (list $v.global.labels $v.elastiController.commonLabels) (.labels | default list))
  "annotations" (concat (list $v.global.annotations $v.elastiController.commonAnnotations) (.annotations | default list))) }}
{{- end }}

{{/* Resolver object metadata: global and resolver common labels. */}}
{{- define "elasti.resolverMeta" -}}
{{- $v := .ctx.Values -}}
{{- include "elasti.metadata" (dict "ctx" .ctx "name" .name "namespace" .namespace "clusterScoped" .clusterScoped
  "base" (include "elasti.resolverLabels" .ctx)
  "labels" (concat (list $v.global.labels $v.elastiResolver.commonLabels) (.labels | default list))
  "annotations" (concat (list $v.global.annotations $v.elastiResolver.commonAnnotations) (.annotations | default list))) }}
{{- end }}

{{/*
elasti.image: registry/repository[:tag][@digest]. KubeElasti's own
repositories name the image elasti replaces, so they become elasti's
repository at the chart's appVersion (a KubeElasti values file names them
and must install elasti unchanged). Arguments: ctx, image (the component's
image values), component (elasti-operator or elasti-resolver).
*/}}
{{- define "elasti.image" -}}
{{- $img := .image -}}
{{- $repo := $img.repository -}}
{{- $tag := $img.tag | default "" | toString -}}
{{- if has $repo (list (printf "kubeelasti/%s" .component) (printf "tfy-images/%s" .component)) -}}
{{- $repo = printf "elasti-dev/%s" .component -}}
{{- $tag = "" -}}
{{- end -}}
{{- $registry := $img.registry | default .ctx.Values.global.image.registry | default "" | trimSuffix "/" -}}
{{- $ref := $repo -}}
{{- if $registry }}{{ $ref = printf "%s/%s" $registry $repo }}{{ end -}}
{{- if and $img.digest (not $img.tag) -}}
{{- printf "%s@%s" $ref $img.digest -}}
{{- else if $img.digest -}}
{{- printf "%s:%s@%s" $ref ($tag | default .ctx.Chart.AppVersion) $img.digest -}}
{{- else -}}
{{- printf "%s:%s" $ref ($tag | default .ctx.Chart.AppVersion) -}}
{{- end -}}
{{- end }}

{{/*
The namespaces the operator watches, comma-separated as --watch-namespace
takes them, or "" for all.
*/}}
{{- define "elasti.watchNamespace" -}}
{{- join "," (.Values.global.allowedNamespaces | default list) -}}
{{- end }}

{{/* Whole seconds (older KubeElasti charts) become a Go duration. */}}
{{- define "elasti.duration" -}}
{{- if kindIs "string" . }}{{ . }}{{ else }}{{ printf "%ds" (int64 .) }}{{ end -}}
{{- end }}

{{/*
The environment KubeElasti's deployments set, which both components read
to find each other (ENGINEERING.md, "Compatibility facts").
*/}}
{{- define "elasti.operatorEnv" -}}
- name: ELASTI_OPERATOR_NAMESPACE
  value: {{ .Release.Namespace }}
- name: ELASTI_OPERATOR_DEPLOYMENT_NAME
  value: {{ include "elasti.operatorName" . }}
- name: ELASTI_OPERATOR_SERVICE_NAME
  value: elasti-operator-controller-service
- name: ELASTI_OPERATOR_PORT
  value: {{ .Values.elastiController.service.port | quote }}
{{- end }}
{{- define "elasti.resolverEnv" -}}
- name: ELASTI_RESOLVER_NAMESPACE
  value: {{ .Release.Namespace }}
- name: ELASTI_RESOLVER_DEPLOYMENT_NAME
  value: {{ include "elasti.resolverName" . }}
- name: ELASTI_RESOLVER_SERVICE_NAME
  value: elasti-resolver-service
- name: ELASTI_RESOLVER_PORT
  value: {{ .Values.elastiResolver.service.port | quote }}
- name: ELASTI_RESOLVER_PROXY_PORT
  value: {{ .Values.elastiResolver.reverseProxyService.port | quote }}
{{- end }}

{{/* The wake token's env, mount and volume (deploy/components/wake-token). */}}
{{- define "elasti.wakeTokenEnv" -}}
{{- if .Values.wakeToken.existingSecret }}
- name: ELASTI_WAKE_TOKEN_FILE
  value: /var/run/secrets/elasti/wake-token/token
{{- end }}
{{- end }}
{{- define "elasti.wakeTokenMount" -}}
{{- if .Values.wakeToken.existingSecret }}
- name: wake-token
  mountPath: /var/run/secrets/elasti/wake-token
  readOnly: true
{{- end }}
{{- end }}
{{- define "elasti.wakeTokenVolume" -}}
{{- if .Values.wakeToken.existingSecret }}
# Not optional: without the Secret the pod waits for it instead of
# starting without a token (the binary would refuse to start anyway).
- name: wake-token
  secret:
    secretName: {{ .Values.wakeToken.existingSecret }}
    items:
      - key: {{ .Values.wakeToken.secretKey }}
        path: token
{{- end }}
{{- end }}

{{/*
The operator's rules on the objects of the ElastiServices it serves: the
ClusterRole's, or with global.allowedNamespaces the watched namespace's Role.
*/}}
{{- define "elasti.operatorRules" -}}
# Informer on ElastiServices: the objects the operator reconciles.
- apiGroups: ["elasti.truefoundry.com"]
  resources: ["elastiservices"]
  verbs: ["get", "list", "watch"]
# Add and remove the elasti.truefoundry.com/finalizer on ElastiServices
# (a metadata patch; the spec is never written).
- apiGroups: ["elasti.truefoundry.com"]
  resources: ["elastiservices"]
  verbs: ["patch", "update"]
# Report mode, lastScaledUpTime and conditions through the status subresource.
- apiGroups: ["elasti.truefoundry.com"]
  resources: ["elastiservices/status"]
  verbs: ["update", "patch"]
# Read the public Services and create, keep in shape and delete the private
# elasti-<svc>-pvt-<hash> Services that select the target's pods.
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
# Watch the target's endpoints, and create, update and delete the
# elasti-<svc>-endpointslice-to-resolver-<hash> slices that point a public
# Service at the resolver while the target is at zero.
- apiGroups: ["discovery.k8s.io"]
  resources: ["endpointslices"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
# Before taking the resolver away from a Service, read the pod behind a
# ready endpoint: EndpointSlice and ReplicaSet controllers that are
# behind (after an apiserver restart) list pods as ready that are gone or
# about to go; and, while a target wakes, list the pods its Service
# selects (at most 100, every 2 s) for its WakeStage events. No watch.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list"]
# ... and the ReplicaSet that owns that pod: whether it has acted on its
# latest spec, so the pod is not about to be deleted.
- apiGroups: ["apps"]
  resources: ["replicasets"]
  verbs: ["get"]
# Observe Deployment and StatefulSet scale targets (replicas, readiness).
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets"]
  verbs: ["get", "list", "watch"]
# Scale Deployment and StatefulSet targets to and from zero, only through
# their scale subresource.
- apiGroups: ["apps"]
  resources: ["deployments/scale", "statefulsets/scale"]
  verbs: ["get", "update", "patch"]
# Observe Argo Rollout scale targets.
- apiGroups: ["argoproj.io"]
  resources: ["rollouts"]
  verbs: ["get", "list", "watch"]
# Scale Argo Rollout targets through their scale subresource.
- apiGroups: ["argoproj.io"]
  resources: ["rollouts/scale"]
  verbs: ["get", "update", "patch"]
# Read the HorizontalPodAutoscaler named in spec.autoscaler (type hpa), to
# wake its target within its replica bounds. Never written.
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: ["get", "list", "watch"]
# Pause and resume the KEDA ScaledObject named in spec.autoscaler so it does
# not fight scale-to-zero.
- apiGroups: ["keda.sh"]
  resources: ["scaledobjects"]
  verbs: ["get", "patch", "update"]
{{- end }}
{{- define "elasti.operatorEventRules" -}}
# Record Events (core API, used by tools/record) on ElastiServices.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
# Record Events (events.k8s.io API, used by tools/events) on ElastiServices.
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{/*
The operator container's args and env, shared by its Deployment and by
helm uninstall's pre-delete hook (uninstall-hook.yaml), which runs the
same binary with the same configuration plus --release-all, so both find
the same Lease, Deployment, resolver and watched namespace.
*/}}
{{- define "elasti.operatorArgs" -}}
{{- $m := .Values.elastiController.manager -}}
{{- toYaml $m.args }}
{{- with include "elasti.watchNamespace" . }}
- --watch-namespace={{ . }}
{{- end }}
{{- include "elasti.logArgs" $m.log }}
{{- with $m.extraArgs }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
elasti.logArgs: a component's log values as flags, each only when it is not
the binaries' default (so the defaults render manifests/): -v (klog's
verbosity) and --log-format. Argument: the component's log values.
*/}}
{{- define "elasti.logArgs" -}}
{{- if .level }}
- -v={{ .level }}
{{- end }}
{{- if ne .format "text" }}
- --log-format={{ .format }}
{{- end }}
{{- end }}

{{- define "elasti.operatorContainerEnv" -}}
{{- $v := .Values -}}
{{- $c := $v.elastiController -}}
{{- include "elasti.wakeTokenEnv" . }}
# The Go runtime collects harder as the heap nears the container's
# memory limit instead of being OOM-killed past it.
- name: GOMEMLIMIT
  valueFrom:
    resourceFieldRef:
      resource: limits.memory
{{- include "elasti.resolverEnv" . | nindent 0 }}
{{- include "elasti.operatorEnv" . | nindent 0 }}
- name: KUBERNETES_CLUSTER_DOMAIN
  value: {{ $v.global.kubernetesClusterDomain }}
- name: POLLING_INTERVAL
  value: {{ include "elasti.duration" $c.manager.env.pollingInterval }}
{{- with $c.manager.env.prometheusTriggerServerAddress }}
# Default Prometheus for triggers that do not set serverAddress.
- name: PROMETHEUS_TRIGGER_SERVER_ADDRESS
  value: {{ . | quote }}
{{- end }}
{{- $authSecret := $c.manager.env.prometheusTriggerAuthorizationSecret | default dict }}
{{- if $authSecret.name }}
{{- if $c.manager.env.prometheusTriggerAuthorizationHeader }}
{{- fail "elastiController.manager.env: set prometheusTriggerAuthorizationSecret or prometheusTriggerAuthorizationHeader, not both" }}
{{- end }}
# The operator's credential for its default Prometheus, from a Secret.
- name: PROMETHEUS_TRIGGER_AUTHORIZATION_HEADER
  valueFrom:
    secretKeyRef:
      name: {{ $authSecret.name | quote }}
      key: {{ $authSecret.key | default "authorization" | quote }}
{{- else }}
{{- with $c.manager.env.prometheusTriggerAuthorizationHeader }}
- name: PROMETHEUS_TRIGGER_AUTHORIZATION_HEADER
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- if $c.manager.sentry.enabled }}
- name: SENTRY_DSN
  valueFrom:
    secretKeyRef:
      name: {{ $v.global.secretName }}
      key: operatorSentryDsn
- name: SENTRY_ENVIRONMENT
  value: {{ $c.manager.sentry.environment | default "production" | quote }}
{{- else }}
# Error reporting is off unless the elasti-sentry Secret exists.
- name: SENTRY_DSN
  valueFrom:
    secretKeyRef:
      name: elasti-sentry
      key: dsn
      optional: true
- name: SENTRY_ENVIRONMENT
  value: {{ $c.manager.sentry.environment | default "production" | quote }}
{{- end }}
{{- with $c.manager.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The pod labels of helm uninstall's pre-delete hook (uninstall-hook.yaml). */}}
{{- define "elasti.uninstallLabels" -}}
app.kubernetes.io/name: elasti-uninstall
app.kubernetes.io/part-of: elasti
{{- end }}
