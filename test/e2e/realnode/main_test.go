package realnode

import (
	"os"
	"testing"

	"github.com/elasti-dev/elasti/test/e2e/e2ebed"
)

// stopBed is read when the tests are over: startBed sets it.
func TestMain(m *testing.M) { os.Exit(e2ebed.Main(m, func() { stopBed() })) }
