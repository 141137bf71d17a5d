package procnode

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// probeLoop runs one probe on its schedule and calls report on every
// transition between success and failure (after the probe's thresholds),
// starting from "not yet succeeded".
func (c *container) probeLoop(ctx context.Context, kind string, pr *corev1.Probe, report func(ok bool)) {
	logger := klog.FromContext(ctx).WithValues("probe", kind)
	period := seconds(pr.PeriodSeconds, 10)
	timeout := seconds(pr.TimeoutSeconds, 1)
	successes, failures := threshold(pr.SuccessThreshold), threshold(pr.FailureThreshold, 3)
	select {
	case <-ctx.Done():
		return
	case <-time.After(seconds(pr.InitialDelaySeconds, 0)):
	}
	state, okRun, failRun := false, 0, 0
	// A liveness probe starts out alive; only failures matter.
	if kind == "liveness" {
		state = true
	}
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for {
		err := c.probeOnce(ctx, pr, timeout)
		if err == nil {
			okRun, failRun = okRun+1, 0
		} else {
			okRun, failRun = 0, failRun+1
			logger.V(4).Info("Probe failed", "err", err)
		}
		switch {
		case !state && okRun >= successes:
			state = true
			report(true)
		case state && failRun >= failures:
			state = false
			logger.V(2).Info("Probe failing", "failures", failRun, "err", err)
			report(false)
			if kind == "liveness" {
				return // the container is being restarted
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func seconds(v int32, def int32) time.Duration {
	if v <= 0 {
		v = def
	}
	return time.Duration(v) * time.Second
}

func threshold(v int32, def ...int32) int {
	if v <= 0 {
		if len(def) > 0 {
			return int(def[0])
		}
		return 1
	}
	return int(v)
}

// probeOnce runs the probe against the pod's IP, from the host through the
// pod network, the way a kubelet reaches its pods.
func (c *container) probeOnce(ctx context.Context, pr *corev1.Probe, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ip := c.pod.sandbox.IP
	switch {
	case pr.HTTPGet != nil:
		g := pr.HTTPGet
		port, err := c.portNumber(g.Port.String())
		if err != nil {
			return err
		}
		host := ip
		if g.Host != "" && g.Host != ip {
			return fmt.Errorf("httpGet host %q: the process node probes only the pod IP", g.Host)
		}
		scheme := "http"
		if g.Scheme == corev1.URISchemeHTTPS {
			scheme = "https"
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+net.JoinHostPort(host, strconv.Itoa(port))+g.Path, nil)
		if err != nil {
			return err
		}
		req.Header.Set("User-Agent", "kube-probe/procnode")
		for _, h := range g.HTTPHeaders {
			req.Header.Set(h.Name, h.Value)
		}
		resp, err := probeClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
		}
		return nil
	case pr.TCPSocket != nil:
		port, err := c.portNumber(pr.TCPSocket.Port.String())
		if err != nil {
			return err
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	}
	return fmt.Errorf("only httpGet and tcpSocket probes are supported by the process node")
}

// probeClient is a kubelet's probe client: no keep-alives, no redirects
// followed beyond the first answer, any certificate accepted.
var probeClient = &http.Client{
	Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // kubelets do not verify probe certificates
	},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}
