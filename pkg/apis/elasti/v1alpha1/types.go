package v1alpha1

import (
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Finalizer holds an ElastiService until serving is restored and the objects
// the operator generated for it are gone.
const Finalizer = "elasti.truefoundry.com/finalizer"

// Modes reported in status.mode.
const (
	// ModeProxy routes the public Service to the resolver: the target has no
	// Ready pod.
	ModeProxy = "proxy"
	// ModeServe routes the public Service straight to the target's pods.
	ModeServe = "serve"
)

// Scale target kinds. The lowercase plural forms are KubeElasti's legacy
// spellings; Canonical maps them onto the real kinds.
const (
	KindDeployment        = "Deployment"
	KindStatefulSet       = "StatefulSet"
	KindRollout           = "Rollout"
	LegacyKindDeployments = "deployments"
	LegacyKindRollouts    = "rollouts"
)

// API versions a scale target may have.
const (
	APIVersionApps   = "apps/v1"
	APIVersionArgoV1 = "argoproj.io/v1alpha1"
)

// Trigger and autoscaler types.
const (
	TriggerTypePrometheus = "prometheus"
	AutoscalerTypeHPA     = "hpa"
	AutoscalerTypeKEDA    = "keda"
)

// Match types for probeResponse rules.
const (
	MatchExact             = "Exact"
	MatchPathPrefix        = "PathPrefix"
	MatchRegularExpression = "RegularExpression"
)

// Spec defaults; the CRD schema applies the same values server-side.
const (
	DefaultMinTargetReplicas     = 1
	DefaultCooldownPeriodSeconds = 900
	MaxCooldownPeriodSeconds     = 604800
	DefaultEnabledSchedule       = "0 0 * * *"
	DefaultEnabledDuration       = "24h"
)

// Bounds on spec.enabledPeriod's additions; the CRD schema repeats the
// lengths, and the operator checks them all (pkg/validation).
const (
	// MaxTimeZoneLength bounds enabledPeriod.timeZone. The longest IANA
	// name, America/Argentina/ComodRivadavia, has 32 characters.
	MaxTimeZoneLength = 64
	// MaxPreWarmLength bounds enabledPeriod.preWarm as text.
	MaxPreWarmLength = 32
	// MaxPreWarm bounds enabledPeriod.preWarm: a cold start takes seconds
	// or minutes, and a longer lead only keeps a target up for nothing.
	MaxPreWarm = time.Hour
)

// MaxRecentColdStarts bounds status.recentColdStarts; the CRD schema's
// maxItems repeats it.
const MaxRecentColdStarts = 16

// Limits on a spec, beyond the schema's, that the operator enforces (see
// pkg/validation): a spec past them is refused with the reason InvalidSpec. The
// CRD schema repeats MaxTriggers and the metadata's key counts and string
// lengths; the byte bounds are operator-side only, since a schema counts
// characters and cannot measure an untyped value such as threshold.
const (
	// MaxTriggers bounds spec.triggers; a real spec has one or two.
	MaxTriggers = 10
	// MaxTriggerMetadataBytes bounds one trigger's metadata as JSON.
	MaxTriggerMetadataBytes = 32 << 10
	// MaxTriggerQueryBytes bounds a trigger's PromQL query.
	MaxTriggerQueryBytes = 16 << 10
	// MaxTriggerMetadataKeys bounds the keys of one trigger's metadata:
	// five are read, the rest ignored, as KubeElasti ignores them.
	MaxTriggerMetadataKeys = 16
	// MaxTriggerHeaders bounds metadata.headers.
	MaxTriggerHeaders = 16
	// MaxTriggerHeaderValueLength bounds one header value: room for a
	// large bearer token, and the 8 KiB most servers allow a header line.
	MaxTriggerHeaderValueLength = 8 << 10
	// MaxTriggerServerAddressLength bounds metadata.serverAddress.
	MaxTriggerServerAddressLength = 2048
	// MaxTriggerUptimeFilterLength bounds metadata.uptimeFilter, a label
	// matcher list.
	MaxTriggerUptimeFilterLength = 1024
)

// Limits on spec.probeResponse. Every resolver replica keeps every
// ElastiService's rules of the whole cluster, compiled, so one namespace's
// rules must not be able to take the memory every other namespace's sleeping
// Services need: 1,000 ElastiServices at all these maxima, every character
// four bytes long, keep about 100 MiB in a resolver, and with ASCII about
// 60 MiB, of its 256Mi (docs/benchmarks.md, "Resolver memory at the CRD's
// largest specs"). A real spec has one to three rules, one per health
// checker, with a path of a few dozen characters, perhaps a User-Agent
// match, and a body such as "ok". Lengths are in characters, as the CRD
// schema's maxLength counts them. The schema repeats all but the
// regular-expression budget, which no schema can measure; the operator
// checks them all (pkg/validation), and the resolver never compiles a
// regular expression past the budget (pkg/regexbudget).
const (
	// MaxProbeRules bounds spec.probeResponse.
	MaxProbeRules = 8
	// MaxProbeMatches bounds a rule's headers and, separately, its
	// queryParams.
	MaxProbeMatches = 4
	// MaxProbeValueLength bounds a path, header or query value: an exact
	// value, a prefix or a regular expression.
	MaxProbeValueLength = 128
	// MaxProbeNameLength bounds a header or query parameter name.
	MaxProbeNameLength = 64
	// MaxProbeMethodLength bounds a rule's method.
	MaxProbeMethodLength = 16
	// MaxProbeBodyLength bounds a canned response body.
	MaxProbeBodyLength = 256
	// MinProbeStatus and MaxProbeStatus bound a canned response status: a
	// final status, never an informational 1xx.
	MinProbeStatus = 200
	MaxProbeStatus = 599
	// MaxProbeRegexpCost is what all the regular expressions of one
	// ElastiService may cost together, in about compiled instructions
	// (pkg/regexbudget says how they are counted): a health check's
	// expression costs 25 to 40, so this allows six to ten of them.
	MaxProbeRegexpCost = 256
)

// MaxWakeWith bounds spec.wakeWith; the CRD schema's maxItems repeats it,
// and the operator checks it too (pkg/validation). A real group is a
// database, a cache and a worker or two; each entry is waited on in turn
// while a request is held, so a long chain only makes a cold start longer.
const MaxWakeWith = 8

// Condition types and reasons in status.conditions.
const (
	ConditionReady = "Ready"
	// ConditionDependenciesReady is present only on an ElastiService with
	// spec.wakeWith. While the group is wanted up it is False as long as a
	// dependency has fewer ready replicas than it wants, with the reason
	// DependencyNotReady and a message naming the first such dependency and
	// its ready/wanted counts; the target is not woken past it. True
	// (DependenciesReady) once every dependency is Ready; False with
	// GroupAsleep while the group sleeps.
	ConditionDependenciesReady = "DependenciesReady"
	// ReasonDependenciesReady: every dependency has its wanted replicas
	// ready.
	ReasonDependenciesReady = "DependenciesReady"
	// ReasonDependencyNotReady: a wake waits on the dependency the message
	// names.
	ReasonDependencyNotReady = "DependencyNotReady"
	// ReasonDependencyMissing: a dependency does not exist (or its kind is
	// not served); the wake waits on it.
	ReasonDependencyMissing = "DependencyMissing"
	// ReasonGroupAsleep: the target is asleep and no wake is under way;
	// the dependencies may be at zero.
	ReasonGroupAsleep = "GroupAsleep"
	// ConditionResolverPortsAssigned is True when every TCP port of the
	// public Service has a resolver port of its own (see ResolverPorts).
	// False means the Service is reached through Host routing on the
	// resolver's shared proxy port instead.
	ConditionResolverPortsAssigned = "ResolverPortsAssigned"
	// ConditionTriggersEvaluated is False while the idle poller cannot
	// evaluate the triggers (an unreachable or failing Prometheus, a query
	// it refuses, no series), with the failure's reason (pkg/triggers'
	// Reason, e.g. QueryFailed) and message; the target is then never
	// scaled to zero. It turns True (ReasonTriggersEvaluated) at the next
	// clean evaluation, and is absent while no evaluation ever failed.
	ConditionTriggersEvaluated = "TriggersEvaluated"
	// ConditionHPAFound is present while spec.autoscaler names an HPA
	// (type hpa). True (ReasonHPAOwnsTarget) while that HPA exists in the
	// ElastiService's namespace and scales its target: wakes then stay
	// inside the HPA's replica bounds. False (ReasonHPANotFound,
	// ReasonHPAScalesAnotherTarget, ReasonHPAUnreadable) while elasti
	// wakes the target as if no HPA were named. The idle poller writes it
	// when it changes.
	ConditionHPAFound = "HPAFound"

	// ReasonTriggersEvaluated: the last evaluation of the triggers ran
	// clean, whatever its verdict.
	ReasonTriggersEvaluated = "Evaluated"
	// ReasonHPAOwnsTarget: the named HPA scales the target.
	ReasonHPAOwnsTarget = "HPAOwnsTarget"
	// ReasonHPANotFound: no HPA of that name in the namespace.
	ReasonHPANotFound = "HPANotFound"
	// ReasonHPAScalesAnotherTarget: the named HPA scales another workload.
	ReasonHPAScalesAnotherTarget = "HPAScalesAnotherTarget"
	// ReasonHPAUnreadable: the operator could not read the HPA.
	ReasonHPAUnreadable = "HPAUnreadable"
	// ReasonResolverPortsAssigned: every TCP port of the Service has one.
	ReasonResolverPortsAssigned = "ResolverPortsAssigned"
	// ReasonResolverPortRangeExhausted: the operator's
	// --resolver-port-range has no free port left for this Service.
	ReasonResolverPortRangeExhausted = "ResolverPortRangeExhausted"
	// ReasonResolverPortQuotaExceeded: the Service has more TCP ports than
	// the operator's --resolver-ports-per-elastiservice, or its namespace
	// holds its --resolver-ports-per-namespace already.
	ReasonResolverPortQuotaExceeded = "ResolverPortQuotaExceeded"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ElastiService scales a target to zero while its public Service is idle and
// wakes it on the first request.
type ElastiService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ElastiServiceSpec   `json:"spec,omitempty"`
	Status ElastiServiceStatus `json:"status,omitempty"`
}

// ElastiServiceSpec is the desired behaviour of an ElastiService.
//
// Scalar fields with defaults are omitempty, as in KubeElasti, so the operator
// never sends a whole spec back to the apiserver: a zero cooldownPeriod would
// be dropped and defaulted to 900. It patches metadata and writes status
// through the subresource instead.
type ElastiServiceSpec struct {
	// ScaleTargetRef names the workload that is scaled to and from zero.
	ScaleTargetRef ScaleTargetRef `json:"scaleTargetRef"`
	// Service is the public Service, in the ElastiService's namespace, whose
	// traffic wakes the target.
	Service string `json:"service"`
	// MinTargetReplicas is the replica count a wake scales the target to.
	MinTargetReplicas int32 `json:"minTargetReplicas,omitempty"`
	// CooldownPeriod is how many seconds the triggers must stay idle, and the
	// last wake must be in the past, before the target is scaled to zero.
	CooldownPeriod int32 `json:"cooldownPeriod,omitempty"`
	// Triggers decide when the target is idle; all must be below threshold.
	Triggers []ScaleTrigger `json:"triggers,omitempty"`
	// Autoscaler is the HPA or KEDA ScaledObject that scales the target above
	// zero, so elasti can keep out of its way.
	Autoscaler *AutoscalerSpec `json:"autoscaler,omitempty"`
	// EnabledPeriod limits scale-to-zero to a recurring window. Outside it the
	// target is held at minTargetReplicas. Omitted means always enabled.
	EnabledPeriod *EnabledPeriod `json:"enabledPeriod,omitempty"`
	// ProbeResponse lists requests the resolver answers itself while the
	// target is at zero, so health checkers do not wake it.
	ProbeResponse []ProbeResponseRule `json:"probeResponse,omitempty"`
	// WakeWith lists workloads, in the ElastiService's namespace, that wake
	// with the target, in order: each is scaled up and Ready before the next
	// is scaled, and the target last. After the target sleeps, each is
	// scaled to zero unless another ElastiService that names it is awake or
	// it is another ElastiService's scaleTargetRef. At most MaxWakeWith.
	// KubeElasti has no such field; omitted, nothing changes.
	WakeWith []Dependency `json:"wakeWith,omitempty"`
	// WaitingPage answers a browser navigation with a page that reloads
	// itself while the target wakes; see WaitingPage. KubeElasti has no such
	// field; omitted, the resolver's --waiting-page decides (off by default).
	WaitingPage *WaitingPage `json:"waitingPage,omitempty"`
	// Hold bounds the requests the resolver holds for the Service while it
	// wakes: how long each and how many at once; see Hold. KubeElasti has
	// no such field; omitted, the resolver's flags decide.
	Hold *Hold `json:"hold,omitempty"`
}

// Dependency is one workload of spec.wakeWith: a Deployment, StatefulSet or
// Rollout in the ElastiService's own namespace (there is no namespace
// field: an ElastiService never scales another namespace's workload).
type Dependency struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	// Replicas is what a wake scales the dependency to, and how many of
	// its replicas must be ready before the next one is scaled; 0 or unset
	// means 1.
	Replicas int32 `json:"replicas,omitempty"`
}

// Ref returns the dependency as a scale target reference, legacy kinds
// canonicalised.
func (d Dependency) Ref() ScaleTargetRef {
	return ScaleTargetRef{APIVersion: d.APIVersion, Kind: d.Kind, Name: d.Name}.Canonical()
}

// Wanted is the replica count a wake scales the dependency to.
func (d Dependency) Wanted() int32 {
	if d.Replicas < 1 {
		return 1
	}
	return d.Replicas
}

// ScaleTargetRef identifies a workload with a scale subresource.
type ScaleTargetRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
}

// Canonical returns the kind with KubeElasti's legacy plural spellings
// mapped to the real kind names.
func (r ScaleTargetRef) Canonical() ScaleTargetRef {
	switch r.Kind {
	case LegacyKindDeployments:
		r.Kind = KindDeployment
	case LegacyKindRollouts:
		r.Kind = KindRollout
	}
	return r
}

// ScaleTrigger is one idleness signal.
type ScaleTrigger struct {
	// Type is the trigger kind; only "prometheus" exists.
	Type string `json:"type"`
	// Metadata is free-form and read by the trigger's own parser: query,
	// serverAddress, threshold, uptimeFilter, headers.
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// AutoscalerSpec names the autoscaler that owns the target above zero.
type AutoscalerSpec struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// EnabledPeriod is a recurring window during which scale-to-zero is allowed,
// read on the clock of TimeZone (UTC when it is empty, as KubeElasti reads
// every window). Outside it the target is held up.
type EnabledPeriod struct {
	// Schedule is a 5-field cron expression that opens the window.
	Schedule string `json:"schedule,omitempty"`
	// Duration is how long the window stays open, as a Go duration, on the
	// wall clock of TimeZone: a window opened at 22:00 for 8h closes at
	// 06:00 even on a night the clocks change (see pkg/schedule).
	Duration string `json:"duration,omitempty"`
	// TimeZone is the IANA time zone (such as Europe/Berlin) whose clock
	// Schedule and Duration are read on. Empty means UTC.
	TimeZone string `json:"timeZone,omitempty"`
	// PreWarm, a Go duration of at most MaxPreWarm, wakes the target that
	// long before the window closes and keeps it up until then, so the
	// first request after the window does not wait for a cold start.
	PreWarm string `json:"preWarm,omitempty"`
}

// ProbeResponseRule matches a request that the resolver answers without
// waking the target. Every field that is set must match.
type ProbeResponseRule struct {
	Path        *PathMatch        `json:"path,omitempty"`
	Headers     []NameValueMatch  `json:"headers,omitempty"`
	QueryParams []NameValueMatch  `json:"queryParams,omitempty"`
	Method      string            `json:"method,omitempty"`
	Response    ProbeCannedAnswer `json:"response"`
}

// PathMatch matches the request path.
type PathMatch struct {
	// Type is Exact, PathPrefix or RegularExpression.
	Type  string `json:"type"`
	Value string `json:"value"`
}

// NameValueMatch matches one header or query parameter.
type NameValueMatch struct {
	Name string `json:"name"`
	// Type is Exact or RegularExpression.
	Type  string `json:"type"`
	Value string `json:"value"`
}

// ProbeCannedAnswer is what the resolver replies to a matched probe.
type ProbeCannedAnswer struct {
	Status int32  `json:"status"`
	Body   string `json:"body,omitempty"`
}

// ElastiServiceStatus is the observed state of an ElastiService.
type ElastiServiceStatus struct {
	// LastReconciledTime is when the operator last wrote this status.
	LastReconciledTime *metav1.Time `json:"lastReconciledTime,omitempty"`
	// LastScaledUpTime is when the target was last scaled up from zero, by a
	// request or anyone else; scale-to-zero waits cooldownPeriod after it.
	LastScaledUpTime *metav1.Time `json:"lastScaledUpTime,omitempty"`
	// LastScaledDownTime is when the target was last scaled to zero: when
	// its current or latest sleep began.
	LastScaledDownTime *metav1.Time `json:"lastScaledDownTime,omitempty"`
	// LastColdStart is how long the latest scale-up from zero took, from
	// the scale-up to the first Ready pod.
	LastColdStart *metav1.Duration `json:"lastColdStart,omitempty"`
	// RecentColdStarts are the durations of the latest scale-ups from zero,
	// oldest first, at most MaxRecentColdStarts; kubectl elasti status
	// reports their median.
	RecentColdStarts []metav1.Duration `json:"recentColdStarts,omitempty"`
	// LastHeld is how long the latest held request a resolver released
	// waited, from its arrival to its forward to a pod (the resolver's
	// X-Elasti-Cold-Start): what a client of a wake waited, which may be
	// less than lastColdStart when the resolver's own readiness check
	// passed before the kubelet's.
	LastHeld *metav1.Duration `json:"lastHeld,omitempty"`
	// Wakes counts the target's scale-ups from zero since this
	// ElastiService was created.
	Wakes int64 `json:"wakes,omitempty"`
	// TimeAsleep is the total time the target spent at zero in sleeps that
	// have ended; a current sleep adds the time since LastScaledDownTime.
	TimeAsleep *metav1.Duration `json:"timeAsleep,omitempty"`
	// TargetReplicas is the scale target's replica count the operator last
	// observed; unset until it has observed one. A pointer, so that a
	// sleeping target shows 0, not <none>, in kubectl's Replicas column.
	TargetReplicas *int32 `json:"targetReplicas,omitempty"`
	// Mode is "proxy" while traffic goes to the resolver and "serve" while it
	// goes to the target's pods.
	Mode string `json:"mode,omitempty"`
	// ObservedGeneration is the spec generation the status describes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions hold at least Ready, with a reason saying why not,
	// ResolverPortsAssigned once the Service's ports are known, and with
	// spec.wakeWith DependenciesReady.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ResolverPorts are the resolver ports that front the Service's ports:
	// one per TCP port of spec.service, and while a change of spec.service
	// completes, of the old Service too. A resolver that serves per-port
	// routing listens on each resolverPort and knows the Service from that
	// port alone. They are recorded here, not derived, so they survive
	// operator restarts and leader changes (see pkg/portalloc).
	ResolverPorts []ResolverPort `json:"resolverPorts,omitempty"`
}

// ResolverPort is the resolver port assigned to one port of a Service. A
// connection to a resolver pod on ResolverPort is for that Service port,
// whatever its Host says.
type ResolverPort struct {
	// Service is the public Service, in the ElastiService's namespace.
	Service string `json:"service"`
	// Name is the Service port's name.
	Name string `json:"name,omitempty"`
	// Port is the Service port number.
	Port int32 `json:"port"`
	// ResolverPort is the port resolver pods listen on for it.
	ResolverPort int32 `json:"resolverPort"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ElastiServiceList is a list of ElastiServices.
type ElastiServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ElastiService `json:"items"`
}
