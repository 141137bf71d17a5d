// Package clusterview is what the resolver knows of the cluster: the
// Services and their EndpointSlices (InformerEndpoints), whether the
// resolver is in front of each (the operator's resolver slices and their
// drains), the Services the ElastiServices name (NamedIndex), the pods of
// the Services it holds requests for (InformerPodView, and the reads that
// vouch for a pod past its bounds), and the check of every address
// against the pod that holds it (VouchedEndpoints). It reads the
// apiserver and answers lookups; it holds, admits and forwards nothing.
package clusterview
