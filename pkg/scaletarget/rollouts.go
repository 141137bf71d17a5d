package scaletarget

import (
	"context"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/nsinformer"
	"github.com/elasti-dev/elasti/pkg/tombstone"
)

// RolloutInformer watches Argo Rollouts only while their CRD exists. Argo is
// optional, so a plain informer would fail its list forever on clusters
// without it; instead one watch on that single CRD starts and stops the
// Rollout informer.
type RolloutInformer struct {
	dynamic dynamic.Interface
	// namespaces are watched one informer each (nsinformer); [""] is all.
	namespaces []string
	crds       cache.SharedIndexInformer
	factory    apiextensionsinformers.SharedInformerFactory

	mu       sync.RWMutex
	handlers []func(Ref)
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
}

// NewRolloutInformer watches the Rollout CRD; the handlers added to it
// receive every Rollout added, updated or deleted in namespaces (empty: all)
// while it is installed.
func NewRolloutInformer(dyn dynamic.Interface, apiext apiextensionsclient.Interface, namespaces []string) *RolloutInformer {
	factory := apiextensionsinformers.NewSharedInformerFactoryWithOptions(apiext, 0,
		apiextensionsinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", RolloutCRDName).String()
		}), apiextensionsinformers.WithTransform(trimCRD))
	return &RolloutInformer{
		dynamic:    dyn,
		namespaces: nsinformer.OrAll(namespaces),
		crds:       factory.Apiextensions().V1().CustomResourceDefinitions().Informer(),
		factory:    factory,
	}
}

// AddHandler adds h to the handlers told of every Rollout added, updated
// or deleted, as a shared informer's AddEventHandler does; add it before
// Run.
func (r *RolloutInformer) AddHandler(h func(Ref)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handlers = append(r.handlers, h)
}

// Run watches the CRD until ctx ends.
func (r *RolloutInformer) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	_, _ = r.crds.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.reconcile(ctx, obj) },
		UpdateFunc: func(_, obj any) { r.reconcile(ctx, obj) },
		DeleteFunc: func(any) { r.stopInformer(ctx) },
	})
	r.factory.Start(ctx.Done())
	<-ctx.Done()
	r.factory.Shutdown()
	r.stopInformer(ctx)
	logger.V(4).Info("Rollout watch stopped")
}

// HasSynced reports whether the CRD watch, and the Rollout informer if it
// runs, have synced.
func (r *RolloutInformer) HasSynced() bool {
	if !r.crds.HasSynced() {
		return false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.informer == nil || r.informer.HasSynced()
}

// Available reports whether Rollouts are being watched.
func (r *RolloutInformer) Available() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.informer != nil
}

// Get returns a Rollout from the cache.
func (r *RolloutInformer) Get(namespace, name string) (*unstructured.Unstructured, error) {
	r.mu.RLock()
	informer := r.informer
	r.mu.RUnlock()
	if informer == nil {
		return nil, ErrRolloutsUnavailable
	}
	obj, exists, err := informer.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, apierrors.NewNotFound(RolloutGVR.GroupResource(), name)
	}
	return obj.(*unstructured.Unstructured), nil
}

func (r *RolloutInformer) reconcile(ctx context.Context, obj any) {
	crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !ok || !established(crd) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.informer != nil {
		return
	}
	each := make([]cache.SharedIndexInformer, len(r.namespaces))
	for i, ns := range r.namespaces {
		each[i] = dynamicinformer.NewFilteredDynamicInformer(r.dynamic, RolloutGVR, ns, 0, cache.Indexers{}, nil).Informer()
	}
	informer := nsinformer.Merge(r.namespaces, each)
	_ = informer.SetTransform(trimRollout)
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    r.notify,
		UpdateFunc: func(_, obj any) { r.notify(obj) },
		DeleteFunc: r.notify,
	})
	informerCtx, cancel := context.WithCancel(ctx)
	r.informer, r.stop = informer, cancel
	go informer.RunWithContext(informerCtx)
	klog.FromContext(ctx).V(2).Info("Argo Rollouts CRD present; watching Rollouts")
}

func (r *RolloutInformer) stopInformer(ctx context.Context) {
	r.mu.Lock()
	informer, stop := r.informer, r.stop
	r.informer, r.stop = nil, nil
	r.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	klog.FromContext(ctx).V(2).Info("Argo Rollouts CRD gone; stopped watching Rollouts")
	// Every cached Rollout target is now missing: tell their owners.
	for _, obj := range informer.GetStore().List() {
		r.notify(obj)
	}
}

func (r *RolloutInformer) notify(obj any) {
	u, ok := tombstone.Object[*unstructured.Unstructured](obj)
	if !ok {
		return
	}
	ref := Ref{Kind: elastiv1alpha1.KindRollout, Namespace: u.GetNamespace(), Name: u.GetName()}
	r.mu.RLock()
	handlers := r.handlers
	r.mu.RUnlock()
	for _, h := range handlers {
		h(ref)
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// trimCRD keeps of the Rollout CRD what established reads: its status
// conditions. Its spec holds the OpenAPI schema of every version, the
// largest part of the object.
func trimCRD(obj any) (any, error) {
	crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return obj, nil
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: crd.Name, UID: crd.UID, ResourceVersion: crd.ResourceVersion, Generation: crd.Generation},
		Status:     apiextensionsv1.CustomResourceDefinitionStatus{Conditions: crd.Status.Conditions},
	}, nil
}

// trimRollout keeps of a Rollout what Scaler.Get and notify read: its
// identity, generation, spec.replicas, the pod template's labels and
// spec.workloadRef's kind and name, as they came, and status.readyReplicas
// (a Rollout in spec.wakeWith is Ready by it). The rest of the pod template
// and the status, most of a Rollout, are never read from the cache.
func trimRollout(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetName(u.GetName())
	out.SetNamespace(u.GetNamespace())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	out.SetGeneration(u.GetGeneration())
	out.SetDeletionTimestamp(u.GetDeletionTimestamp())
	spec := map[string]any{}
	if replicas, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "replicas"); found {
		spec["replicas"] = replicas
	}
	if labels, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "template", "metadata", "labels"); found {
		spec["template"] = map[string]any{"metadata": map[string]any{"labels": labels}}
	}
	ref := map[string]any{}
	for _, f := range []string{"kind", "name"} {
		if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "workloadRef", f); found {
			ref[f] = v
		}
	}
	if len(ref) > 0 {
		spec["workloadRef"] = ref
	}
	if len(spec) > 0 {
		out.Object["spec"] = spec
	}
	if ready, found, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "readyReplicas"); found {
		out.Object["status"] = map[string]any{"readyReplicas": ready}
	}
	return out, nil
}
