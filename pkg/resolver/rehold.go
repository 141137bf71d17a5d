package resolver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/resolver/answer"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/forward"
)

// reheldKey marks the context of a request held again after its pods went
// away (serveOrHold), so that it is held again once at most.
type reheldKey struct{}

// serveOrHold forwards req with forward.Serve. When every Ready pod of
// svc went away before one accepted it (forward.ErrEndpointsGone: the
// Service was put to sleep, or its pods deleted, between the lookup and
// the connect), nothing was sent, and req is held as any request for a
// Service with no Ready endpoint: the hold wakes the Service and forwards
// once a pod is Ready. Before, it was answered 502 after the connect
// patience, and nothing woke the Service. A request whose pods go away
// again after that hold is answered 502.
func (r *Resolver) serveOrHold(w http.ResponseWriter, req *http.Request, logger klog.Logger, svc clusterview.ServiceRef, port string, b clusterview.Backends, waited time.Duration) {
	if err := r.fwd.Serve(w, req, svc, port, b, waited); !errors.Is(err, forward.ErrEndpointsGone) {
		return
	}
	if req.Context().Value(reheldKey{}) != nil {
		answer.Error(w, http.StatusBadGateway, fmt.Sprintf("the ready pods of service %s went away twice before one accepted the request", svc))
		return
	}
	r.holdRequest(w, req.WithContext(context.WithValue(req.Context(), reheldKey{}, true)), logger, svc, port)
}
