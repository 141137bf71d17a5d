package resolver

import (
	"io"
	"net/http"
)

// Healthz answers 200 while the process serves.
func (r *Resolver) Healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

// Readyz answers 200 once the endpoint and probe sources that track
// informers have synced, and every extra source (say, the port listeners)
// has, 503 before. A pod that is not Ready gets no traffic, so a new
// resolver listens on every assigned port before it is sent any.
func (r *Resolver) Readyz(extra ...interface{ HasSynced() bool }) http.HandlerFunc {
	var synced []func() bool
	for _, s := range []any{r.eps, r.probes, r.named} {
		if h, ok := s.(interface{ HasSynced() bool }); ok {
			synced = append(synced, h.HasSynced)
		}
	}
	for _, s := range extra {
		synced = append(synced, s.HasSynced)
	}
	return ReadyzHandler(synced...)
}

// ReadyzHandler answers 200 when every synced func reports true, 503 with
// a plain message otherwise.
func ReadyzHandler(synced ...func() bool) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for _, s := range synced {
			if !s() {
				http.Error(w, "informer caches not synced", http.StatusServiceUnavailable)
				return
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	}
}
