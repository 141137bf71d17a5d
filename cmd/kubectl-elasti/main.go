// Command kubectl-elasti is the kubectl plugin for ElastiServices: on the
// PATH, kubectl runs it as `kubectl elasti` (see pkg/kubectlelasti).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/elasti-dev/elasti/pkg/kubectlelasti"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := kubectlelasti.NewApp(os.Stdout, os.Stderr).Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
