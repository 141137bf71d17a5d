package podnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"

	"golang.org/x/sys/unix"
)

// Listen opens a listener inside the namespace from this process. A socket
// keeps the namespace it was created in, so the listener accepts
// connections to the namespace's addresses: on "0.0.0.0:<port>" it answers
// on every pod IP added with AddIP (and on the transfer address
// NamespaceIP), and on nothing of the host's.
//
// network is "tcp", "tcp4" or "tcp6"; address's host must be empty or an IP
// literal, so no name lookup runs in the namespace. Close closes listeners
// that are still open.
func (n *Network) Listen(network, address string) (net.Listener, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("podnet: Listen: unsupported network %q", network)
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("podnet: Listen: %w", err)
	}
	if host != "" {
		if _, err := netip.ParseAddr(host); err != nil {
			return nil, fmt.Errorf("podnet: Listen: host %q must be an IP literal", host)
		}
	}

	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, ErrClosed
	}
	var ln net.Listener
	err = inNetns(n.NamespacePath(), func() error {
		var err error
		ln, err = net.Listen(network, address)
		return err
	})
	if err != nil {
		if ln != nil {
			_ = ln.Close()
		}
		return nil, err
	}
	n.listeners = append(n.listeners, ln)
	return ln, nil
}

// inNetns runs fn on a dedicated OS thread that has joined the network
// namespace at nsPath. The thread returns to its own namespace afterwards;
// if that fails it stays locked, so the runtime ends it together with the
// goroutine instead of reusing a thread in the wrong namespace.
func inNetns(nsPath string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Opened after locking, so it is this thread's namespace.
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("podnet: open own netns: %w", err)
			return
		}
		defer func() { _ = unix.Close(orig) }()
		target, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("podnet: open %s: %w", nsPath, err)
			return
		}
		defer func() { _ = unix.Close(target) }()
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("podnet: enter %s: %w", nsPath, err)
			return
		}
		fnErr := fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			// Deliberately no UnlockOSThread: the thread is tainted.
			errc <- errors.Join(fnErr, fmt.Errorf("podnet: return from %s: %w", nsPath, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- fnErr
	}()
	return <-errc
}
