package podnet

import "testing"

// Only an isolated process's own, crashed namespaces are stale to it: a
// host-mode name (whose owner holds LockPath) and a live pid's never are.
func TestStaleIsolated(t *testing.T) {
	alive := func(pid int) bool { return pid == 42 }
	for name, want := range map[string]bool{
		IsolatedNamespacePrefix + "42-0a1b2c3d": false, // live owner
		IsolatedSandboxPrefix + "42-0a1b2c3d":   false,
		IsolatedNamespacePrefix + "43-0a1b2c3d": true, // owner gone
		IsolatedSandboxPrefix + "43-0a1b2c3d":   true,
		IsolatedNamespacePrefix + "x-0a1b2c3d":  true, // no pid: nobody's
		IsolatedNamespacePrefix + "0-0a1b2c3d":  true,
		NamespacePrefix + "43-0a1b2c3d":         false, // host mode: LockPath's
		SandboxPrefix + "0a1b2c3d":              false,
		"elasti-other-43":                       false,
		"":                                      false,
	} {
		if got := staleIsolated(name, alive); got != want {
			t.Errorf("staleIsolated(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestPidAlive(t *testing.T) {
	if !pidAlive(1) {
		t.Error("pid 1 is not alive")
	}
	if pidAlive(1 << 30) {
		t.Error("pid 2^30 is alive")
	}
}
