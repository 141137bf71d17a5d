package procnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/test/localcluster/podnet"
)

const (
	// Restart backoff after a container exits: 1s doubling to 10s. A real
	// kubelet starts at 10s and caps at 5 minutes; tests cannot wait that
	// long, and nothing here depends on the exact figures.
	restartBackoffInitial = time.Second
	restartBackoffMax     = 10 * time.Second
	// livenessKillGrace is how long a container failing its liveness
	// probe has between SIGTERM and SIGKILL.
	livenessKillGrace = 5 * time.Second
)

// container supervises one container's process: it starts it, restarts it
// when it exits or fails its liveness probe, and tracks its readiness.
type container struct {
	pod  *pod
	spec *corev1.Container

	mu        sync.Mutex
	proc      *os.Process
	running   bool
	ready     bool
	startedAt metav1.Time
	restarts  int32
	waiting   *corev1.ContainerStateWaiting
	lastTerm  *corev1.ContainerStateTerminated
	// finished is the exit the pod's restartPolicy does not restart
	// after: the container stays terminated.
	finished *corev1.ContainerStateTerminated

	stopping chan struct{}
	done     chan struct{}
}

func newContainer(p *pod, spec *corev1.Container) *container {
	return &container{
		pod: p, spec: spec,
		waiting:  &corev1.ContainerStateWaiting{Reason: "ContainerCreating"},
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
	}
}

func (c *container) start(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("container", c.spec.Name)
	// The sync that started the pod ends long before the container does.
	go c.supervise(klog.NewContext(context.WithoutCancel(ctx), logger))
}

// changed asks the node to report this pod's status again.
func (c *container) changed() { c.pod.node.loop.Add(c.pod.key) }

func (c *container) setWaiting(reason, message string) {
	c.mu.Lock()
	c.running, c.ready = false, false
	c.waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: message}
	c.mu.Unlock()
	c.changed()
}

// supervise runs the process until stop, restarting it with backoff as the
// pod's restartPolicy says: always (Always, the default), after a failure
// only (OnFailure), or never (Never). A container not restarted stays
// terminated, and its exit decides the pod's phase (pod.status).
func (c *container) supervise(ctx context.Context) {
	defer close(c.done)
	logger := klog.FromContext(ctx)
	backoff := restartBackoffInitial
	for {
		exit, err := c.runOnce(ctx)
		select {
		case <-c.stopping:
			return
		default:
		}
		if err == nil && !restarts(c.pod.restartPolicy, exit.ExitCode) {
			logger.Info("Container exited; not restarted", "exit", exit.ExitCode, "reason", exit.Reason, "restartPolicy", c.pod.restartPolicy)
			c.mu.Lock()
			c.finished = exit
			c.mu.Unlock()
			c.changed()
			return
		}
		if err != nil {
			logger.Info("Container could not start", "err", err)
		} else {
			logger.Info("Container exited; restarting", "exit", exit.ExitCode, "reason", exit.Reason, "backoff", backoff)
			c.mu.Lock()
			c.lastTerm = exit
			c.restarts++
			c.mu.Unlock()
			c.setWaiting("CrashLoopBackOff", fmt.Sprintf("back-off %s restarting failed container %s: exit code %d", backoff, c.spec.Name, exit.ExitCode))
		}
		select {
		case <-c.stopping:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, restartBackoffMax)
	}
}

// runOnce starts the process, probes it while it runs and waits for it to
// exit. err is set when it could not start at all.
func (c *container) runOnce(ctx context.Context) (*corev1.ContainerStateTerminated, error) {
	n := c.pod.node
	obj, err := n.podLister.Pods(c.pod.key.Namespace).Get(c.pod.key.Name)
	if err != nil {
		c.setWaiting("CreateContainerConfigError", err.Error())
		return nil, err
	}
	bin, err := n.binaryFor(c.spec.Image)
	if err != nil {
		c.setWaiting("ErrImagePull", err.Error())
		return nil, err
	}
	env, err := n.environment(ctx, obj, c.pod.sandbox.IP, c.spec)
	if err != nil {
		c.setWaiting("CreateContainerConfigError", err.Error())
		return nil, err
	}
	cmd, err := c.command(obj, bin, env)
	if err != nil {
		c.setWaiting("CreateContainerError", err.Error())
		return nil, err
	}
	// The child has its own copy of the log file once started.
	defer cmd.Stdout.(*os.File).Close()
	if err := cmd.Start(); err != nil {
		c.setWaiting("CreateContainerError", err.Error())
		return nil, err
	}
	c.mu.Lock()
	c.proc = cmd.Process
	c.running, c.ready, c.waiting = true, c.spec.ReadinessProbe == nil, nil
	c.startedAt = metav1.Now()
	c.mu.Unlock()
	c.changed()

	probeCtx, stopProbes := context.WithCancel(ctx)
	var probes sync.WaitGroup
	if pr := c.spec.ReadinessProbe; pr != nil {
		probes.Go(func() { c.probeLoop(probeCtx, "readiness", pr, c.setReady) })
	}
	if pr := c.spec.LivenessProbe; pr != nil {
		probes.Go(func() {
			c.probeLoop(probeCtx, "liveness", pr, func(ok bool) {
				if !ok {
					klog.FromContext(ctx).Info("Liveness probe failed; killing the container")
					c.signal(syscall.SIGTERM)
					time.AfterFunc(livenessKillGrace, func() { c.signalProcess(cmd.Process, syscall.SIGKILL) })
				}
			})
		})
	}
	waitErr := cmd.Wait()
	stopProbes()
	probes.Wait()

	exit := &corev1.ContainerStateTerminated{ExitCode: int32(cmd.ProcessState.ExitCode()), Reason: "Completed",
		StartedAt: c.startedAt, FinishedAt: metav1.Now()}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		exit.ExitCode, exit.Signal = 128+int32(ws.Signal()), int32(ws.Signal())
	}
	if waitErr != nil {
		exit.Reason = "Error"
	}
	c.mu.Lock()
	c.proc, c.running, c.ready = nil, false, false
	c.mu.Unlock()
	return exit, nil
}

// restarts reports whether a container that exited with code is started
// again under policy, as a kubelet decides.
func restarts(policy corev1.RestartPolicy, code int32) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	}
	return true
}

func (c *container) setReady(ok bool) {
	c.mu.Lock()
	changed := c.running && c.ready != ok
	if c.running {
		c.ready = ok
	}
	c.mu.Unlock()
	if changed {
		c.changed()
	}
}

// command is the process for the container: `ip netns exec` puts it in the
// pod's network namespace and a private mount namespace, unshare gives it
// a hostname of its own, and a small
// shell binds the pod's files to their usual paths and then execs the
// binary, as the container's user when it sets one.
func (c *container) command(obj *corev1.Pod, bin string, env []string) (*exec.Cmd, error) {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	var args []string
	if len(c.spec.Command) > 0 {
		// The image's entrypoint is the binary itself; a command naming
		// another program cannot run here.
		if base := path.Base(c.spec.Command[0]); base != filepath.Base(bin) {
			return nil, fmt.Errorf("command %q: the process node runs only the image's own binary %s", c.spec.Command[0], filepath.Base(bin))
		}
		for _, a := range c.spec.Command[1:] {
			args = append(args, expand(a, vars))
		}
	}
	for _, a := range c.spec.Args {
		args = append(args, expand(a, vars))
	}

	entry := "/run/.procnode/" + filepath.Base(bin)
	var script strings.Builder
	script.WriteString("set -e\n")
	// A private /run holds the entrypoint and the ServiceAccount files; the
	// host's /run is untouched (the mount namespace is ip's own).
	script.WriteString("mount -t tmpfs -o mode=0755 procnode /run\nmkdir -p /run/.procnode\n")
	// The pod's hostname is its name (leader election uses it as identity).
	fmt.Fprintf(&script, "echo %s > /proc/sys/kernel/hostname\n", quote(obj.Name))
	fmt.Fprintf(&script, ": > %s\nmount --bind %s %s\n", quote(entry), quote(bin), quote(entry))
	for _, m := range c.pod.mounts {
		src, dst := m[0], m[1]
		st, err := os.Stat(src)
		if err != nil {
			return nil, err
		}
		inRun := dst == "/run" || strings.HasPrefix(dst, "/run/") || strings.HasPrefix(dst, "/var/run/")
		switch {
		case inRun && st.IsDir():
			fmt.Fprintf(&script, "mkdir -p %s\n", quote(dst))
		case inRun:
			fmt.Fprintf(&script, "mkdir -p %s\n: > %s\n", quote(path.Dir(dst)), quote(dst))
		default:
			// Outside the private /run a mount point must already
			// exist: creating it would change the host's filesystem.
			fmt.Fprintf(&script, "[ -e %s ] || { echo 'procnode: mount path %s does not exist on this node; mount under /run or /tmp' >&2; exit 1; }\n",
				quote(dst), strings.ReplaceAll(dst, "'", ""))
		}
		fmt.Fprintf(&script, "mount --bind %s %s\n", quote(src), quote(dst))
	}
	if wd := c.spec.WorkingDir; wd != "" {
		fmt.Fprintf(&script, "cd %s\n", quote(wd))
	} else {
		script.WriteString("cd /\n")
	}
	script.WriteString("exec ")
	if uid, gid, ok := runAs(obj, c.spec); ok {
		// Changing the user clears the parent-death signal; setpriv sets it
		// again, so the process dies with the test that started it.
		fmt.Fprintf(&script, "setpriv --reuid=%d --regid=%d --clear-groups --pdeathsig KILL -- ", uid, gid)
	}
	script.WriteString(quote(entry) + ` "$@"` + "\n")

	cmdArgs := append([]string{"netns", "exec", c.pod.sandbox.Name, "unshare", "--uts", "/bin/sh", "-c", script.String(), "procnode"}, args...)
	cmd := exec.Command(podnet.IPPath(), cmdArgs...)
	cmd.Env = env
	logFile, err := os.OpenFile(c.pod.node.LogPath(c.pod.key.Namespace, c.pod.key.Name, c.spec.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logFile, "--- procnode: starting %s %s\n", filepath.Base(bin), strings.Join(args, " "))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}

// runAs is the user a container runs as, from its securityContext or the
// pod's.
func runAs(obj *corev1.Pod, c *corev1.Container) (uid, gid int64, ok bool) {
	var u, g *int64
	if sc := obj.Spec.SecurityContext; sc != nil {
		u, g = sc.RunAsUser, sc.RunAsGroup
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			u = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			g = sc.RunAsGroup
		}
	}
	if u == nil || *u == 0 {
		return 0, 0, false
	}
	if g == nil {
		g = u
	}
	return *u, *g, true
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (c *container) signal(sig syscall.Signal) {
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	c.signalProcess(p, sig)
}

// signalProcess signals the process group, so nothing the container
// started outlives it.
func (c *container) signalProcess(p *os.Process, sig syscall.Signal) {
	if p != nil {
		_ = syscall.Kill(-p.Pid, sig)
	}
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs, and waits for the
// supervisor to finish.
func (c *container) stop(grace time.Duration) {
	select {
	case <-c.stopping:
	default:
		close(c.stopping)
	}
	c.signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return
	case <-time.After(grace):
	}
	c.signal(syscall.SIGKILL)
	<-c.done
}

// status is the container's ContainerStatus.
func (c *container) status() corev1.ContainerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := corev1.ContainerStatus{
		Name: c.spec.Name, Image: c.spec.Image, ImageID: "procnode://" + c.spec.Image,
		Ready: c.ready, RestartCount: c.restarts, Started: new(c.running),
		LastTerminationState: corev1.ContainerState{Terminated: c.lastTerm},
	}
	switch {
	case c.running:
		s.State.Running = &corev1.ContainerStateRunning{StartedAt: c.startedAt}
	case c.finished != nil:
		s.State.Terminated = c.finished.DeepCopy()
	case c.waiting != nil:
		s.State.Waiting = c.waiting.DeepCopy()
	}
	return s
}

// portNumber resolves a probe's port, by number or by the container
// port's name.
func (c *container) portNumber(port string) (int, error) {
	if n, err := strconv.Atoi(port); err == nil {
		return n, nil
	}
	for _, p := range c.spec.Ports {
		if p.Name == port {
			return int(p.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.spec.Name, port)
}
