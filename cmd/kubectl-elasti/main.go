// Command kubectl-elasti is the kubectl plugin for ElastiServices: on the
// PATH, kubectl runs it as `kubectl elasti` (see pkg/kubectlelasti).
//
// Run as kubectl_complete-elasti (a link to it by that name on the PATH),
// it answers shell completion: kubectl 1.26 and later run that for
// `kubectl elasti <TAB>`.
package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/elasti-dev/elasti/pkg/kubectlelasti"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	args := os.Args[1:]
	if filepath.Base(os.Args[0]) == "kubectl_complete-elasti" {
		args = append([]string{cobra.ShellCompRequestCmd}, args...)
	}
	code := kubectlelasti.NewApp(os.Stdout, os.Stderr).Run(ctx, args)
	stop()
	os.Exit(code)
}
