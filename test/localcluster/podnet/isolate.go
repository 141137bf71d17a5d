package podnet

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// IsolatedNamespacePrefix and IsolatedSandboxPrefix start the names of
	// the namespaces an isolated process (see Isolate) makes, followed by
	// its pid: "elasti-pnet-<pid>-<hex>". They differ from NamespacePrefix
	// and SandboxPrefix, so a Setup holding LockPath never takes them for
	// its own leftovers, and the pid tells a crashed owner's from a live
	// one's.
	IsolatedNamespacePrefix = "elasti-pnet-"
	IsolatedSandboxPrefix   = "elasti-psb-"

	// isolatedEnv marks the re-executed binary; its value is the parent's
	// network namespace, which the child checks it has left.
	isolatedEnv = "ELASTI_PODNET_ISOLATED"
)

var (
	// isolated is set once this process runs in a network namespace of
	// its own (Isolate): Setup then needs no machine-wide lock.
	isolated bool
	// isolatedSlot serialises Setups inside one isolated process, as
	// LockPath serialises them on the host: there is one route for PodCIDR
	// per namespace.
	isolatedSlot = make(chan struct{}, 1)
)

// Isolated reports whether Isolate moved this process into a network
// namespace of its own.
func Isolated() bool { return isolated }

// Isolate gives the calling test binary a network namespace of its own, so
// its pod network (the route for PodCIDR, the transfer net, the host end of
// the veth) and its loopback listeners (apiserver, etcd, forwarders) cannot
// meet another package's: the suites that need a pod network then run side
// by side instead of one at a time behind LockPath. Call it first in
// TestMain, after the modes in which the binary is a pod (a client run in
// its sandbox), and before anything starts.
//
// The first call re-executes the binary with the same arguments in a new
// network namespace (CLONE_NEWNET; the mount namespace, so /run/netns, is
// still the host's), forwards signals to it and exits with its code; it
// never returns. In the re-executed binary it brings lo up and returns.
// Without root, or without iproute2, it returns at once and Setup behaves
// as before (and reports those errors itself).
//
// A process in its own namespace reaches nothing but what it builds there,
// so everything that needs the outside (building the cluster binaries,
// installing iproute2) must happen before: the caller's before hook runs
// in the parent, in the host's namespace.
func Isolate(before func() error) {
	if parent, ok := os.LookupEnv(isolatedEnv); ok {
		if err := enterIsolated(parent); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: podnet: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if os.Geteuid() != 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), aptTimeout*2)
	defer cancel()
	if _, err := ipBinary(ctx, func(string, ...any) {}); err != nil {
		return
	}
	if before != nil {
		if err := before(); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
			os.Exit(1)
		}
	}
	os.Exit(runIsolated())
}

// runIsolated runs this binary again in a new network namespace and returns
// its exit code.
func runIsolated() int {
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: podnet: %v\n", err)
		return 1
	}
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Args[0] = os.Args[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), isolatedEnv+"="+self)
	// Pdeathsig belongs to the thread that forked: keep this goroutine on
	// it until the child is gone, so a killed parent (go test's hard
	// timeout) takes the child with it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	// Interrupts and go test's SIGQUIT on timeout go to the child, which
	// tears its bed down (or dumps its goroutines) itself.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: podnet: run in a network namespace of its own: %v\n", err)
		return 1
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code >= 0 {
		return code
	}
	fmt.Fprintf(os.Stderr, "FAIL: podnet: the isolated test binary ended: %v\n", err)
	return 1
}

// enterIsolated checks that this process is not in its parent's namespace
// and brings lo up, which a new namespace has down.
func enterIsolated(parent string) error {
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return err
	}
	if self == parent {
		return fmt.Errorf("%s is set, but this process is still in its parent's network namespace %s", isolatedEnv, parent)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	if _, err := runIP(ctx, "link", "set", "lo", "up"); err != nil {
		return err
	}
	isolated = true
	return nil
}

// takeIsolatedSlot waits for the process's one pod network slot and returns
// its release.
func takeIsolatedSlot(ctx context.Context, timeout time.Duration) (func(), error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case isolatedSlot <- struct{}{}:
		return func() { <-isolatedSlot }, nil
	case <-t.C:
		return nil, fmt.Errorf("podnet: gave up after %s waiting for this process's other pod network", timeout)
	case <-ctx.Done():
		return nil, fmt.Errorf("podnet: waiting for this process's other pod network: %w", ctx.Err())
	}
}

// staleIsolated reports whether namespace name was made by an isolated
// process that is gone: it carries one of the isolated prefixes and a pid
// that no longer runs. A name without a pid is stale too.
func staleIsolated(name string, alive func(pid int) bool) bool {
	var rest string
	switch {
	case strings.HasPrefix(name, IsolatedNamespacePrefix):
		rest = strings.TrimPrefix(name, IsolatedNamespacePrefix)
	case strings.HasPrefix(name, IsolatedSandboxPrefix):
		rest = strings.TrimPrefix(name, IsolatedSandboxPrefix)
	default:
		return false
	}
	p, _, _ := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 0 {
		return true
	}
	return !alive(pid)
}

// pidAlive reports whether a process with this pid exists.
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}
