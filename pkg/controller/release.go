package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

// releasePoll is how often Release looks at the caches again while a
// target starts. The caches are watched, so this only bounds the delay
// between an event and the next pass.
const releasePoll = 500 * time.Millisecond

// Release lets go of one ElastiService for good, while the object itself
// stays: it is the user's, and an uninstall of elasti must not destroy it.
// Its Services are handed back to the target's own pods the way a
// deletion hands them back (restoreServing), and elasti's finalizer is
// removed, so nothing blocks deleting the ElastiService or its namespace
// once no operator runs. Unlike a deletion it never breaks before it makes:
// if a target has no ready pod when ctx ends, the resolver slice stays and
// Release fails, naming the target. No controller workers may run
// meanwhile; the caller holds the operator's Lease (see
// operator.Operator.ReleaseAll). It logs each step as it happens.
func (c *Controller) Release(ctx context.Context, key types.NamespacedName) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "elastiService", klog.KRef(key.Namespace, key.Name))
	ctx = klog.NewContext(ctx, logger)
	var last string
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, releasePoll, true, func(ctx context.Context) (bool, error) {
		done, progress, err := c.releaseStep(ctx, key)
		if err != nil {
			// Transient (a conflict, a slow apiserver): the next pass retries
			// on a fresher cache until ctx ends.
			if lastErr == nil || err.Error() != lastErr.Error() {
				logger.Error(err, "Release step failed; retrying")
			}
			lastErr = err
			return false, nil
		}
		lastErr = nil
		if progress != last {
			logger.Info(progress)
			last = progress
		}
		return done, nil
	})
	if err == nil {
		return nil
	}
	why := last
	if lastErr != nil {
		why = lastErr.Error()
	}
	return fmt.Errorf("ElastiService %s: not released: %s", key, why)
}

// releaseStep is one pass of Release on the cached ElastiService: done once
// it is released (or gone), progress saying where it stands.
func (c *Controller) releaseStep(ctx context.Context, key types.NamespacedName) (done bool, progress string, err error) {
	es, err := c.elastiServices.ElastiServices(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return true, "Gone", nil
	}
	if err != nil {
		return false, "", err
	}
	if c.claims.managesService(es) {
		step, unserved, err := c.restoreServing(ctx, es, true)
		if err != nil {
			return false, "", err
		}
		ref := scaletarget.RefFor(es)
		switch step {
		case restoreScaled:
			return false, fmt.Sprintf("Scaled %s up from zero; waiting for a ready pod", ref), nil
		case restoreWaiting:
			return false, fmt.Sprintf("Waiting for a ready pod of %s before the resolver stops fronting Service %s",
				ref, strings.Join(quoted(unserved), ", ")), nil
		}
	}
	if slices.Contains(es.Finalizers, elastiv1alpha1.Finalizer) {
		if err := c.removeFinalizer(ctx, es); err != nil {
			return false, "", err
		}
	}
	return true, fmt.Sprintf("Released: Service %q serves from its own pods; the ElastiService stays, without elasti's finalizer", es.Spec.Service), nil
}
