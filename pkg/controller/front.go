package controller

import (
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	elastilisters "github.com/elasti-dev/elasti/pkg/generated/listers/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/portalloc"
)

// resolverFront is what puts the resolver in front of a Service: its
// resolver slice (resolverslice.go), its private Service
// (privateservice.go) and its resolver ports (ports.go), with the reads of
// the Service's own endpoints they are decided on. The Controller decides
// when; resolverFront knows how.
type resolverFront struct {
	kubeClient     kubernetes.Interface
	cfg            Config
	ports          *portalloc.Allocator
	elastiServices elastilisters.ElastiServiceLister
	services       corelisters.ServiceLister
	slices         discoverylisters.EndpointSliceLister
	sliceIndexer   cache.Indexer
	resolverSlices discoverylisters.EndpointSliceLister
	recorder       record.EventRecorder
	// queue takes the ElastiServices to sync again when a resolver port
	// is freed; privateServices those whose private Service is wanted.
	queue           Queue
	privateServices KeyAdder
	// terminating holds the namespaces whose creates were refused
	// because they are being deleted: nothing is fronted there.
	terminating *terminatingNamespaces
}
