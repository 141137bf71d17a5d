package operator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/controller"
)

// ReleaseAll lets go of every ElastiService the operator watches, for an
// uninstall (the chart's pre-delete hook runs it): each Service is handed
// back to its target's own pods, make before break, its resolver slice and
// private Service are removed, and elasti's finalizer comes off, while the
// ElastiServices themselves stay (see controller.Controller.Release).
// parallelism ElastiServices are released at once. It returns when all are
// released, or when ctx ends with an error naming each one that is not.
//
// The controller's workers must not run meanwhile, or they would front the
// Services again and put the finalizers back: run it under the operator's
// Lease, with no operator replica left to take it back.
func (o *Operator) ReleaseAll(ctx context.Context, parallelism int) error {
	logger := klog.FromContext(ctx)
	informerCtx, stopInformers := context.WithCancel(ctx)
	defer func() { stopInformers(); o.shutdownInformers() }()
	o.startInformers(informerCtx)
	if !cache.WaitForCacheSync(ctx.Done(), o.Controller.CacheSynced()...) {
		return fmt.Errorf("caches did not sync: %w", context.Cause(ctx))
	}
	// Which ElastiService holds a contested Service is decided as the
	// running operator decided it, so only the holder touches its target.
	o.Controller.PrimeDirectory(ctx)
	all, err := o.watched.elastiServices().Lister().List(labels.Everything())
	if err != nil {
		return err
	}
	logger.Info("Releasing every ElastiService", "count", len(all))
	work := make(chan *elastiv1alpha1.ElastiService)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range max(1, min(parallelism, len(all))) {
		wg.Go(func() {
			for es := range work {
				if err := o.Controller.Release(ctx, es.Key()); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, es := range all {
		work <- es
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d ElastiServices not released: %w", len(errs), len(all), errors.Join(errs...))
	}
	logger.Info("Released every ElastiService", "count", len(all))
	return nil
}

// Uninstall is what the chart's pre-delete hook asks of elasti-operator
// --release-all (see ReleaseAllLeading).
type Uninstall struct {
	// OperatorNamespace/OperatorDeployment name the operator Deployment to
	// stop first; an empty OperatorDeployment stops none.
	OperatorNamespace  string
	OperatorDeployment string
	// Election is the operator's own Lease, which the release holds.
	Election *Election
	// Parallelism is how many ElastiServices are released at once.
	Parallelism int
}

// ReleaseAllLeading stops the operator and releases every ElastiService
// (ReleaseAll) while holding the operator's Lease, for helm uninstall.
//
// The operator Deployment is scaled to zero first, so no replica comes
// back; the Lease then tells when the last leader has stopped acting: a
// leader gives it up only once its workers have finished (runElected), so
// nothing fronts a Service again or puts a finalizer back behind the
// release. The resolver keeps running meanwhile and holds requests to
// sleeping Services until their targets serve.
//
// If the release fails (a target never gets a ready pod before ctx ends),
// the operator Deployment is scaled back to what it had, so the install
// works as before; the Services already released serve from their own pods
// and the operator takes them on again. The error names what was not
// released.
func (o *Operator) ReleaseAllLeading(ctx context.Context, u Uninstall) (err error) {
	logger := klog.FromContext(ctx)
	if u.OperatorDeployment != "" {
		restore, stopErr := o.stopOperator(ctx, u.OperatorNamespace, u.OperatorDeployment)
		if stopErr != nil {
			return stopErr
		}
		// On the named result err, so whatever fails below restores.
		defer func() {
			if err != nil {
				// The caller's ctx may be over: that is usually why we fail.
				restoreCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				if rerr := restore(restoreCtx); rerr != nil {
					err = errors.Join(err, rerr)
				}
			}
		}()
	}
	e := u.Election
	err = fmt.Errorf("did not acquire the operator's Lease %s/%s: %w", e.Lock.LeaseMeta.Namespace, e.Lock.LeaseMeta.Name, context.Cause(ctx))
	electionCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	logger.Info("Waiting for the operator's Lease", "lease", klog.KRef(e.Lock.LeaseMeta.Namespace, e.Lock.LeaseMeta.Name))
	leaderelection.RunOrDie(electionCtx, e.config("elasti-operator-release", leaderelection.LeaderCallbacks{
		OnStartedLeading: func(leaderCtx context.Context) {
			defer cancel()
			logger.Info("Holding the operator's Lease; no operator acts")
			err = o.ReleaseAll(leaderCtx, u.Parallelism)
		},
		OnStoppedLeading: func() {},
	}))
	return err
}

// stopOperator scales the operator Deployment to zero and returns how to
// scale it back.
func (o *Operator) stopOperator(ctx context.Context, namespace, name string) (restore func(context.Context) error, err error) {
	deployments := o.Kube.AppsV1().Deployments(namespace)
	scale, err := deployments.GetScale(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Info("No operator Deployment to stop", "deployment", klog.KRef(namespace, name))
		return func(context.Context) error { return nil }, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stop the operator: %w", err)
	}
	replicas := scale.Spec.Replicas
	if err := setReplicas(ctx, o.Kube, namespace, name, 0); err != nil {
		return nil, fmt.Errorf("stop the operator: %w", err)
	}
	klog.FromContext(ctx).Info("Stopped the operator", "deployment", klog.KRef(namespace, name), "replicas", replicas)
	return func(ctx context.Context) error {
		if replicas == 0 {
			return nil
		}
		if err := setReplicas(ctx, o.Kube, namespace, name, replicas); err != nil {
			return fmt.Errorf("start the operator again: %w", err)
		}
		klog.FromContext(ctx).Info("Started the operator again", "deployment", klog.KRef(namespace, name), "replicas", replicas)
		return nil
	}, nil
}

// setReplicas writes a Deployment's replicas through its scale subresource
// (get and update, the verbs the hook's Role grants).
func setReplicas(ctx context.Context, kube kubernetes.Interface, namespace, name string, replicas int32) error {
	deployments := kube.AppsV1().Deployments(namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale, err := deployments.GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if scale.Spec.Replicas == replicas {
			return nil
		}
		scale.Spec.Replicas = replicas
		_, err = deployments.UpdateScale(ctx, name, scale, metav1.UpdateOptions{FieldManager: controller.AgentName})
		return err
	})
}
