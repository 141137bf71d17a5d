package traffic

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/localcluster/podnet"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/localcluster/realnode"
)

func TestMain(m *testing.M) {
	// A client pod is this binary again, run inside its sandbox, and so is
	// the late app some tests run as web's pods.
	lateAppMain()
	realnet.ClientMain()
	// Beside the other pod-network suites, in a namespace of its own: the
	// "host" below is that namespace, where the bed's routes and veth end
	// live.
	clustertest.Isolate()
	scenariosSideBySide()

	before, err := hostNetworkState("")
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: reading the host's routes and nftables: %v\n", err)
		os.Exit(1)
	}
	// The fake kubelet starts the bed's kwok pods (e2ebed.ServeApps runs it
	// before any is made): Ready only once the address answers, as on a
	// real node, in one status write as kwok's own start made.
	clustertest.ReadyAfterAddress()
	code := clustertest.Main(m)
	ours := ""
	if b, ok := theBed.Started(); ok {
		ours = b.Network.HostLink()
	}
	stopBed()
	// The network rule: the run changes nothing on the host once it is
	// over (kube-proxy only ever programs the node namespace).
	after, err := hostNetworkState(ours)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: reading the host's routes and nftables: %v\n", err)
		os.Exit(1)
	}
	if after != hostNetworkFilter(before, ours) {
		fmt.Fprintf(os.Stderr, "FAIL: the run left the host's routes or nftables changed\n--- before\n%s\n--- after\n%s\n", before, after)
		code = 1
	}
	os.Exit(code)
}

// sideBySide is how many parallel tests (sideBySideScenario's) run at once
// unless -test.parallel says otherwise: more than there are, so all of
// them, whatever order Go releases them in. They wait on cooldowns, rate
// windows, polls and wakes, not on the CPU, so Go's default (GOMAXPROCS,
// 2 on CI's machine) only made them wait for one another: 200 s for the
// five of 29 Nov against 107 s for the longest.
const sideBySide = 32

// scenariosSideBySide sets -test.parallel to sideBySide unless the
// command line set it.
func scenariosSideBySide() {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", fmt.Sprint(sideBySide)); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: -test.parallel: %v\n", err)
			os.Exit(1)
		}
	}
}

// hostNetworkState is the host namespace's routing tables and nftables
// ruleset as text, less the lines of other test packages' pod networks
// (which run beside this one under make test): lines naming a podnet link
// other than ours, and the real node's bridge and pod veths (package
// realnode checks its own cleanup).
func hostNetworkState(ours string) (string, error) {
	var b strings.Builder
	for _, args := range [][]string{{"ip", "route", "show", "table", "all"}, {"nft", "list", "ruleset"}} {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out)
		}
		fmt.Fprintf(&b, "$ %s\n%s", strings.Join(args, " "), out)
	}
	return hostNetworkFilter(b.String(), ours), nil
}

func hostNetworkFilter(state, ours string) string {
	var kept []string
	for _, line := range strings.Split(state, "\n") {
		if strings.Contains(line, podnet.LinkPrefix) && (ours == "" || !strings.Contains(line, ours)) {
			continue
		}
		// The real node's bridge, and its pods' veths, which the CNI
		// bridge plugin names veth<hex>; this bed's own links are podnet's.
		if strings.Contains(line, realnode.Bridge) || strings.Contains(line, " dev veth") {
			continue
		}
		kept = append(kept, line)
	}
	return strings.Join(kept, "\n")
}
