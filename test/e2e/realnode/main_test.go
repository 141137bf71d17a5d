package realnode

import (
	"os"
	"testing"

	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

func TestMain(m *testing.M) {
	// A realnet client pod is this binary again, run in its sandbox.
	realnet.ClientMain()
	code := clustertest.Main(m)
	stopBed()
	os.Exit(code)
}
