package scaletarget

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// Writer is what waking a target writes through; Scaler is one.
type Writer interface {
	Scale(ctx context.Context, ref Ref, replicas int32) error
	KEDAPauser
}

// ErrKEDANotResumed marks a wake whose target is up but whose KEDA
// ScaledObject could not be resumed.
var ErrKEDANotResumed = errors.New("the target is up but its KEDA ScaledObject is still paused")

// Wake is the one way elasti scales a target up: the scale server on a
// request, the idle poller outside the enabled period, a spec.service move
// and an ElastiService's deletion all call it. It scales ref to replicas,
// then hands the target back to the KEDA ScaledObject autoscaler names, if
// any, which the scale-down paused at zero. Callers take replicas, and
// whether the target needs a wake at all, from GoalFor, which keeps a wake
// inside the bounds of an HPA that owns the target.
//
// Its error policy is the same for every caller:
//   - the scale write failing is an error, and the target is not up;
//   - a ScaledObject that does not exist is no error: nothing holds the
//     target at zero;
//   - any other failure to resume KEDA is returned wrapping
//     ErrKEDANotResumed, after the target is up. The wake happened
//     (Woken reports true): callers report the error and go on, since a
//     paused KEDA only keeps the target at its minimum until it is resumed.
func Wake(ctx context.Context, w Writer, ref Ref, replicas int32, autoscaler *elastiv1alpha1.AutoscalerSpec) error {
	if err := w.Scale(ctx, ref, replicas); err != nil {
		return err
	}
	if err := ResumeKEDA(ctx, w, ref.Namespace, autoscaler); err != nil {
		return fmt.Errorf("%w: %w", ErrKEDANotResumed, err)
	}
	return nil
}

// Woken reports whether a Wake that returned err left the target up.
func Woken(err error) bool { return err == nil || errors.Is(err, ErrKEDANotResumed) }

// ignoreMissingScaledObject is the KEDA half of Wake's policy, shared with
// the hand-back when an ElastiService goes away: a ScaledObject that is
// gone has nothing to resume.
func ignoreMissingScaledObject(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
