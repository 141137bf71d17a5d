package kubectl

import (
	"os"
	"testing"

	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
)

func TestMain(m *testing.M) { os.Exit(clustertest.Main(m)) }
