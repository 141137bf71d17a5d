package localcluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"
)

// healthCheckTimeout bounds one readiness probe while the apiserver comes
// back: a request it accepted but never answered must not stall the wait.
const healthCheckTimeout = 2 * time.Second

// errNotStartedHere is returned for a cluster this process did not start
// (Load, ELASTI_TEST_CLUSTER): it holds no process to stop or start again,
// and other test binaries may be using that cluster.
var errNotStartedHere = errors.New("the kube-apiserver was not started by this process, so it cannot be restarted from here")

// RestartAPIServer stops the kube-apiserver with sig and starts it again
// (StopAPIServer, then StartAPIServer). It returns once the apiserver is
// Healthy.
func (c *Cluster) RestartAPIServer(ctx context.Context, sig syscall.Signal) error {
	if err := c.StopAPIServer(sig); err != nil {
		return err
	}
	return c.StartAPIServer(ctx)
}

// StopAPIServer stops the kube-apiserver and waits until it has exited.
// etcd, the controllers and kwok keep running, so their clients live
// through the outage a crashed or restarted apiserver causes. SIGKILL is a
// crash: connections reset, nothing drained; SIGTERM is the graceful
// shutdown, with SIGKILL after stopGrace. Only a cluster this process
// started can be stopped this way.
func (c *Cluster) StopAPIServer(sig syscall.Signal) error {
	p := c.lockedComponent(KubeAPIServerBinary)
	if p == nil {
		return errNotStartedHere
	}
	if p.Exited() {
		return fmt.Errorf("kube-apiserver had already exited (%v); see %s", p.waitErr, p.logPath)
	}
	return p.kill(sig, stopGrace)
}

// StartAPIServer starts the kube-apiserver that StopAPIServer stopped, with
// the same flags: the same port, certificates, tokens, audit log and etcd,
// so every kubeconfig still works and every object is still there. Its log
// continues the old one. It returns once the apiserver is Healthy, with an
// error if another component exited meanwhile.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	p, err := c.relaunch(KubeAPIServerBinary)
	if err != nil {
		return err
	}
	// StopDir of a detached cluster reads the PID from the state file.
	if err := c.saveState(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, startLimit)
	defer cancel()
	err = WaitFor(ctx, p, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, healthCheckTimeout)
		defer cancel()
		return c.Healthy(ctx)
	})
	if err != nil {
		return err
	}
	return c.othersRunning()
}

// othersRunning fails if a component other than the apiserver has exited:
// one that gave up during the outage would otherwise show up only as a
// cluster that silently stopped working.
func (c *Cluster) othersRunning() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, p := range c.procs {
		if p.name != KubeAPIServerBinary && p.Exited() {
			errs = append(errs, fmt.Errorf("%s exited while the kube-apiserver was away (%v)\n--- last lines of %s ---\n%s",
				p.name, p.waitErr, p.logPath, Tail(p.logPath, 10)))
		}
	}
	return errors.Join(errs...)
}

// relaunch starts the exited component name again in its place, so Stop
// still stops components in reverse start order.
func (c *Cluster) relaunch(name string) (*Process, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, old := range c.procs {
		if old.name != name {
			continue
		}
		p, err := old.relaunch()
		if err != nil {
			return nil, err
		}
		c.procs[i] = p
		c.PIDs[name] = p.cmd.Process.Pid
		return p, nil
	}
	return nil, errNotStartedHere
}

// lockedComponent is component for a caller that does not hold c.mu.
func (c *Cluster) lockedComponent(name string) *Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.component(name)
}

// component is the running or exited process of name, nil if this process
// did not start it. Hold c.mu.
func (c *Cluster) component(name string) *Process {
	for _, p := range c.procs {
		if p.name == name {
			return p
		}
	}
	return nil
}

// RestartControllerManager stops kube-controller-manager (SIGTERM) and
// starts it again with the same flags, and returns once its controllers
// run. After an apiserver restart its EndpointSlice controller can stay
// stuck for many minutes: it retries a Service whose slices its informer
// seems to lag ("EndpointSlice informer cache is out of date") with a
// back-off up to 1000 s. A new process starts from a fresh list, as a
// cluster operator restarting it would.
func (c *Cluster) RestartControllerManager(ctx context.Context) error {
	p := c.lockedComponent(KubeControllerManagerBinary)
	if p == nil {
		return errNotStartedHere
	}
	if !p.Exited() {
		if err := p.kill(syscall.SIGTERM, stopGrace); err != nil {
			return err
		}
	}
	if _, err := c.relaunch(KubeControllerManagerBinary); err != nil {
		return err
	}
	if err := c.saveState(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, startLimit)
	defer cancel()
	return c.waitControllerManager(ctx)
}

// FreezeControllerManager stops kube-controller-manager where it stands
// (SIGSTOP to its process group) until thaw (SIGCONT): its controllers
// neither read nor write meanwhile, the way an EndpointSlice controller
// that backs off a Service for seconds writes nothing for it. The
// cluster runs it without leader election, so a freeze loses no lease.
// thaw may be called more than once.
func (c *Cluster) FreezeControllerManager() (thaw func(), err error) {
	p := c.lockedComponent(KubeControllerManagerBinary)
	if p == nil {
		return nil, errNotStartedHere
	}
	if p.Exited() {
		return nil, fmt.Errorf("kube-controller-manager had already exited (%v); see %s", p.waitErr, p.logPath)
	}
	pgid := -p.cmd.Process.Pid
	if err := syscall.Kill(pgid, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("freezing kube-controller-manager: %w", err)
	}
	return sync.OnceFunc(func() { _ = syscall.Kill(pgid, syscall.SIGCONT) }), nil
}
