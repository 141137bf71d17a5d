package directprobe

import (
	"net"
	"slices"
	"time"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// followReady reports, once the slices list ep's pod Ready, how long
// after passed that was: the time direct probing saved the held requests.
// It gives up when the pod leaves the slices, after maxLeadFollow, or
// when maxProbedPods are followed already.
func (p *Prober) followReady(svc clusterview.ServiceRef, ep clusterview.UnreadyEndpoint, passed time.Time) {
	p.mu.Lock()
	if p.following >= maxProbedPods {
		p.mu.Unlock()
		return
	}
	p.following++
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer func() {
			p.mu.Lock()
			p.following--
			p.mu.Unlock()
		}()
		timeout := time.NewTimer(maxLeadFollow)
		defer timeout.Stop()
		for {
			changed, stop := p.eps.Watch(svc)
			ready, listed := readyOrListed(p.eps, svc, ep)
			if ready {
				stop()
				p.report.Lead(time.Since(passed))
				return
			}
			if !listed {
				stop()
				return
			}
			select {
			case <-changed:
				stop()
			case <-timeout.C:
				stop()
				return
			case <-p.ctx.Done():
				stop()
				return
			}
		}
	}()
}

// readyOrListed reports whether the slices of svc list ep's address
// Ready, and whether they still list ep's pod at all.
func readyOrListed(eps clusterview.EndpointSource, svc clusterview.ServiceRef, ep clusterview.UnreadyEndpoint) (ready, listed bool) {
	b, err := eps.Lookup(svc, "")
	if err != nil {
		return false, false
	}
	for _, a := range b.Addrs {
		if host, _, err := net.SplitHostPort(a); err == nil && host == ep.IP {
			return true, true
		}
	}
	return false, slices.ContainsFunc(b.Unready, func(u clusterview.UnreadyEndpoint) bool { return u.UID == ep.UID })
}
