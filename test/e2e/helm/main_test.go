package helm

import (
	"os"
	"testing"

	"github.com/elasti-dev/elasti/test/e2e/e2ebed"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
)

// stopBed is read when the tests are over: startBed sets it.
// Its bed serves kwok's app pods (e2ebed.ServeApps) before it makes any, so
// their Ready waits for their address.
func TestMain(m *testing.M) {
	clustertest.ReadyAfterAddress()
	os.Exit(e2ebed.Main(m, func() { stopBed() }))
}
