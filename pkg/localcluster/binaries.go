package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BinDirEnv names a directory that already holds every binary, skipping the
// build script.
const BinDirEnv = "ELASTI_CLUSTER_BIN_DIR"

// EnsureBinaries returns the directory holding etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubectl, kwok and kwok's stages,
// building them through hack/build-cluster-bins.sh on a cold machine. The
// script's progress lines are copied to progress.
func EnsureBinaries(ctx context.Context, progress io.Writer) (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "build-cluster-bins.sh"))
	cmd.Stdout = &out
	cmd.Stderr = progress
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building control-plane binaries with hack/build-cluster-bins.sh: %w", err)
	}
	dir := strings.TrimSpace(out.String())
	if dir == "" {
		return "", errors.New("hack/build-cluster-bins.sh printed no binary directory")
	}
	return dir, nil
}

// RepoRoot finds the repository by walking up from the working directory to
// the directory holding hack/build-cluster-bins.sh, so tests work from any
// package directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "build-cluster-bins.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the elasti repository root (hack/build-cluster-bins.sh) above the working directory")
		}
		dir = parent
	}
}

// DefaultDir is where make cluster-up keeps its cluster:
// ${ELASTI_CACHE_DIR:-~/.cache/elasti}/cluster, beside the binaries.
func DefaultDir() string {
	if d := os.Getenv("ELASTI_CACHE_DIR"); d != "" {
		return filepath.Join(d, "cluster")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return filepath.Join(cache, "elasti", "cluster")
}
