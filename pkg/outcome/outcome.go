// Package outcome names what the operator's parts report to its metrics:
// the result of an ElastiService sync, of an idle evaluation and of a wake
// request. It sits below both the parts that report (controller, idle,
// wakeserver) and the metrics that count them, so neither imports the
// other. Each value is a metric label value and, for Wake, the outcome a
// wake answer carries on the wire: they are contracts, so they never
// change.
package outcome

// Sync is the result of one ElastiService sync.
type Sync string

const (
	SyncSuccess Sync = "success"
	// SyncWaiting: the ElastiService waits for an object outside the
	// operator; its Ready condition says which.
	SyncWaiting Sync = "waiting"
	// SyncRequeued: not a failure, the sync asked to come back later.
	SyncRequeued Sync = "requeued"
	SyncError    Sync = "error"
)

// Idle is the idle poller's verdict on one ElastiService.
type Idle string

const (
	IdleScaledToZero    Idle = "scaled_to_zero"
	IdleBusy            Idle = "busy"
	IdleCooldown        Idle = "cooldown"
	IdleAlreadyZero     Idle = "already_zero"
	IdleOutsideWindow   Idle = "outside_window"
	IdleTriggerError    Idle = "trigger_error"
	IdleInvalidSchedule Idle = "invalid_schedule"
	IdleTargetMissing   Idle = "target_missing"
	IdleScaleFailed     Idle = "scale_failed"
	IdleDeleting        Idle = "deleting"
	IdleNotManaged      Idle = "not_managed"
	IdleNotFronted      Idle = "not_fronted"
	IdleMoving          Idle = "moving"
	// IdleWaking is an evaluation past the cooldown of a wake that has
	// not served yet: its target has had no Ready pod since, and it is
	// not undone while a resolver still holds a request for it.
	IdleWaking Idle = "waking"
	// IdlePreWarm is an evaluation inside the pre-warm lead of
	// enabledPeriod: the target is held up, as outside the window.
	IdlePreWarm Idle = "pre_warm"
)

// Wake is the result of one wake request to the operator.
type Wake string

const (
	WakeScaled      Wake = "scaled"
	WakeAlreadyUp   Wake = "already_up"
	WakeUnknown     Wake = "unknown_service"
	WakeFailed      Wake = "failed"
	WakeBadRequest  Wake = "bad_request"
	WakeUnavailable Wake = "unavailable"
	// WakeUnauthorized is a request without the wake token, when one is
	// configured.
	WakeUnauthorized Wake = "unauthorized"
)
