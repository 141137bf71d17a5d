package operator

import (
	"k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	autoscalingv2informers "k8s.io/client-go/informers/autoscaling/v2"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	autoscalingv2listers "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	versioned "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions"
	elastiv1alpha1informers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions/elasti/v1alpha1"
	elastilisters "github.com/elasti-dev/elasti/pkg/generated/listers/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/nsinformer"
)

// watched are the informers of the namespaces the operator watches: one
// factory per namespace of --watch-namespace (or one for all namespaces),
// their informers merged per resource by nsinformer, whose package comment
// says why per-namespace informers and not one filtered cluster-wide watch.
type watched struct {
	namespaces []string
	kube       []informers.SharedInformerFactory
	elasti     []elastiinformers.SharedInformerFactory
}

// elastiTransform is the ElastiService informers' transform: the operator
// weighs each against its namespace's budget before trimming it.
func newWatched(kube kubernetes.Interface, elasti versioned.Interface, opts Options, elastiTransform cache.TransformFunc) *watched {
	w := &watched{namespaces: nsinformer.OrAll(opts.WatchNamespaces)}
	for _, ns := range w.namespaces {
		w.kube = append(w.kube, informers.NewSharedInformerFactoryWithOptions(kube, 0,
			informers.WithNamespace(ns), informers.WithTransform(trimForCache)))
		w.elasti = append(w.elasti, elastiinformers.NewSharedInformerFactoryWithOptions(elasti, opts.ResyncPeriod,
			elastiinformers.WithNamespace(ns), elastiinformers.WithTransform(elastiTransform)))
	}
	return w
}

func (w *watched) start(stop <-chan struct{}) {
	for i := range w.kube {
		w.kube[i].Start(stop)
		w.elasti[i].Start(stop)
	}
}

func (w *watched) shutdown() {
	for i := range w.kube {
		w.kube[i].Shutdown()
		w.elasti[i].Shutdown()
	}
}

func (w *watched) elastiServices() elastiv1alpha1informers.ElastiServiceInformer {
	return merge(w, w.elasti, func(f elastiinformers.SharedInformerFactory) elastiv1alpha1informers.ElastiServiceInformer {
		return f.Elasti().V1alpha1().ElastiServices()
	}, elastilisters.NewElastiServiceLister)
}

func (w *watched) services() coreinformers.ServiceInformer {
	return merge(w, w.kube, func(f informers.SharedInformerFactory) coreinformers.ServiceInformer {
		return f.Core().V1().Services()
	}, corelisters.NewServiceLister)
}

func (w *watched) endpointSlices() discoveryinformers.EndpointSliceInformer {
	return merge(w, w.kube, func(f informers.SharedInformerFactory) discoveryinformers.EndpointSliceInformer {
		return f.Discovery().V1().EndpointSlices()
	}, discoverylisters.NewEndpointSliceLister)
}

func (w *watched) deployments() appsinformers.DeploymentInformer {
	return merge(w, w.kube, func(f informers.SharedInformerFactory) appsinformers.DeploymentInformer {
		return f.Apps().V1().Deployments()
	}, appslisters.NewDeploymentLister)
}

func (w *watched) statefulSets() appsinformers.StatefulSetInformer {
	return merge(w, w.kube, func(f informers.SharedInformerFactory) appsinformers.StatefulSetInformer {
		return f.Apps().V1().StatefulSets()
	}, appslisters.NewStatefulSetLister)
}

func (w *watched) horizontalPodAutoscalers() autoscalingv2informers.HorizontalPodAutoscalerInformer {
	return merge(w, w.kube, func(f informers.SharedInformerFactory) autoscalingv2informers.HorizontalPodAutoscalerInformer {
		return f.Autoscaling().V2().HorizontalPodAutoscalers()
	}, autoscalingv2listers.NewHorizontalPodAutoscalerLister)
}

// typedInformer is client-go's typed informer interface (Informer and
// Lister) over a merged informer.
type typedInformer[L any] struct {
	informer cache.SharedIndexInformer
	lister   L
}

func (t typedInformer[L]) Informer() cache.SharedIndexInformer { return t.informer }
func (t typedInformer[L]) Lister() L                           { return t.lister }

// merge returns the typed informer of one resource over every watched
// namespace: the factory's own with one namespace, else the namespaces'
// informers merged (nsinformer.Merge) under a lister of the merged index.
func merge[F any, I interface {
	Informer() cache.SharedIndexInformer
}, L any](w *watched, factories []F, typed func(F) I, newLister func(cache.Indexer) L) I {
	if len(factories) == 1 {
		return typed(factories[0])
	}
	each := make([]cache.SharedIndexInformer, len(factories))
	for i, f := range factories {
		// Informer() registers the informer with its factory, which then
		// starts it.
		each[i] = typed(f).Informer()
	}
	inf := nsinformer.Merge(w.namespaces, each)
	return any(typedInformer[L]{informer: inf, lister: newLister(inf.GetIndexer())}).(I)
}
