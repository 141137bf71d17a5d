// Package names derives the names of the objects the operator generates for
// an ElastiService. They match KubeElasti v0.1.30 exactly, so an operator
// swap adopts the objects KubeElasti left behind instead of duplicating them.
package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

const (
	prefix               = "elasti-"
	privateServiceSuffix = "-pvt-"
	resolverSliceSuffix  = "-endpointslice-to-resolver-"
	hashLen              = 10

	// maxServiceName is the DNS-1035 label limit for Service names.
	maxServiceName = 63
	// maxSliceName is the DNS-1123 subdomain limit for EndpointSlice names.
	maxSliceName = 253
)

// PrivateService is the Service that mirrors the public Service's selector
// and ports, so the resolver can find the target's pods while the public
// Service points at the resolver: elasti-<svc>-pvt-<hash>.
func PrivateService(publicService string) string {
	return build(publicService, privateServiceSuffix, maxServiceName)
}

// IsPrivateService reports whether name has PrivateService's form. A cut
// public name cannot be recovered from it, so this is the form only.
func IsPrivateService(name string) bool {
	return strings.HasPrefix(name, prefix) && strings.Contains(name, privateServiceSuffix)
}

// ResolverSlice is the EndpointSlice that points the public Service at the
// resolver in proxy mode: elasti-<svc>-endpointslice-to-resolver-<hash>.
func ResolverSlice(publicService string) string {
	return build(publicService, resolverSliceSuffix, maxSliceName)
}

// ResolverSliceManagedBy is the endpointslice.kubernetes.io/managed-by
// value of every resolver slice: the EndpointSlice controller leaves such a
// slice alone, and the resolver takes it as the sign that it is in front of
// the slice's Service.
const ResolverSliceManagedBy = "elasti-operator.elasti.truefoundry.com"

// IsResolverSlice reports whether name has ResolverSlice's form.
func IsResolverSlice(name string) bool {
	return strings.HasPrefix(name, prefix) && strings.Contains(name, resolverSliceSuffix)
}

// build cuts the service name so the result fits in limit, trimming a
// trailing '-' left by the cut. The hash is of the full name, so two long
// names with a common prefix still differ.
func build(svc, suffix string, limit int) string {
	sum := sha256.Sum256([]byte(svc))
	hash := hex.EncodeToString(sum[:])[:hashLen]
	room := limit - len(prefix) - len(suffix) - hashLen
	if len(svc) > room {
		svc = strings.TrimRight(svc[:room], "-")
	}
	return prefix + svc + suffix + hash
}
