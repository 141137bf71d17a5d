package realnode

import (
	"os"
	"testing"

	"github.com/elasti-dev/elasti/pkg/localcluster/clustertest"
)

func TestMain(m *testing.M) {
	code := clustertest.Main(m)
	stopBed()
	os.Exit(code)
}
