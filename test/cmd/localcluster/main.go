// Command localcluster starts and stops the project's local control plane for
// make cluster-up / cluster-down and make demo.
//
//	localcluster up     start (or reuse) the cluster and print the KUBECONFIG
//	localcluster down   stop it
//	localcluster dir    print the state directory
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/elasti-dev/elasti/test/localcluster"
)

func main() {
	dir := flag.String("dir", localcluster.DefaultDir(), "directory for the cluster's data, logs and kubeconfigs")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: %s [--dir DIR] up|down|dir\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	var err error
	switch flag.Arg(0) {
	case "up":
		err = up(*dir)
	case "down":
		err = localcluster.StopDir(*dir)
		if err == nil {
			fmt.Fprintf(os.Stderr, "local cluster in %s stopped\n", *dir)
		}
	case "dir":
		fmt.Println(*dir)
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "localcluster %s: %v\n", flag.Arg(0), err)
		os.Exit(1)
	}
}

func up(dir string) error {
	if c, err := localcluster.Load(dir); err == nil {
		if c.Healthy(context.Background()) == nil {
			fmt.Fprintf(os.Stderr, "local cluster already running in %s\n", dir)
			printExport(c)
			return nil
		}
		// A stale state file from a crashed run: clear it before starting anew.
		_ = localcluster.StopDir(dir)
	}
	// Old data would resurrect objects from a previous run.
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	c, err := localcluster.Start(ctx, localcluster.Options{Dir: dir, Detach: true, Progress: os.Stderr})
	if err != nil {
		return err
	}
	printExport(c)
	return nil
}

func printExport(c *localcluster.Cluster) {
	fmt.Fprintf(os.Stderr, "use it with:\n")
	fmt.Printf("export KUBECONFIG=%s\n", c.Kubeconfig)
	fmt.Fprintf(os.Stderr, "kubectl matching the server: %s\n", filepath.Join(c.BinDir, "kubectl"))
}
