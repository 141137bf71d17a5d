package controller

import (
	"sync"

	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/record"

	"github.com/elasti-dev/elasti/pkg/directory"
	elastilisters "github.com/elasti-dev/elasti/pkg/generated/listers/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

// groupWaker wakes an ElastiService's group (spec.wakeWith) in order, and
// restores it when elasti lets go (group.go).
type groupWaker struct {
	scaler   *scaletarget.Scaler
	replicas Replicas
	recorder record.EventRecorder
}

// podLiveness asks the apiserver whether the pods behind a Service's ready
// endpoints stay (live.go).
type podLiveness struct {
	kubeClient kubernetes.Interface
	front      *resolverFront
	// readForbidden logs once that pods or their controllers cannot be
	// read.
	readForbidden sync.Once
}

// claimer decides which ElastiService claims a Service in the directory
// (claims.go).
type claimer struct {
	directory      *directory.Directory
	elastiServices elastilisters.ElastiServiceLister
	services       corelisters.ServiceLister
	slices         discoverylisters.EndpointSliceLister
	// queue is told of a claimant displaced, so it reports the conflict.
	queue Queue
}
