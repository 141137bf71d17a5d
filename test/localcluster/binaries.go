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
	"runtime"
	"strings"
)

// BinDirEnv names a directory that already holds every binary, skipping the
// build script. EnsureBinaries still checks that it holds all of Binaries and
// KwokStagesFile.
const BinDirEnv = "ELASTI_CLUSTER_BIN_DIR"

// The names of the files in the directory EnsureBinaries returns.
const (
	EtcdBinary                  = "etcd"
	KubeAPIServerBinary         = "kube-apiserver"
	KubeControllerManagerBinary = "kube-controller-manager"
	KubeSchedulerBinary         = "kube-scheduler"
	KubectlBinary               = "kubectl"
	KubeProxyBinary             = "kube-proxy"
	KubeletBinary               = "kubelet" // the real node's (package realnode)
	KwokBinary                  = "kwok"
	CoreDNSBinary               = "coredns"
	TraefikBinary               = "traefik"
	PrometheusBinary            = "prometheus"
	HelmBinary                  = "helm" // charts/elasti's lint, render and install
	// KwokStagesFile is kwok's stages (node and pod lifecycle) in one
	// multi-document file, for kwok's --config.
	KwokStagesFile = "stages.yaml"
	// GatewayAPICRDDir is the standard Gateway API CRDs (one YAML file a
	// kind), at the version Traefik's go.mod pins: a link into the Go
	// module cache's sigs.k8s.io/gateway-api config/crd/standard.
	GatewayAPICRDDir = "gateway-api-crds"
)

// Binaries lists every executable EnsureBinaries guarantees.
var Binaries = []string{
	EtcdBinary,
	KubeAPIServerBinary,
	KubeControllerManagerBinary,
	KubeSchedulerBinary,
	KubectlBinary,
	KubeProxyBinary,
	KubeletBinary,
	KwokBinary,
	CoreDNSBinary,
	TraefikBinary,
	PrometheusBinary,
	HelmBinary,
}

// EnsureBinaries returns the directory holding etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubectl, kube-proxy, kubelet (one
// Kubernetes version), kwok and kwok's stages, CoreDNS (with its kubernetes
// plugin), Traefik, Prometheus and helm, and the standard Gateway API CRDs
// (GatewayAPICRDDir), building them through hack/build-cluster-bins.sh on a
// cold machine. The script also installs the host packages kube-proxy needs
// (nft, conntrack, ip) and those the real node needs (containerd, runc, the
// CNI plugins) when they are missing. Its progress lines are copied
// to progress. With BinDirEnv set, that directory is used instead of the
// script. Either way every binary is checked to exist and be executable, and
// the error names the ones that are not.
func EnsureBinaries(ctx context.Context, progress io.Writer) (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		if err := checkBinaries(dir); err != nil {
			return "", fmt.Errorf("%s is set, but %w", BinDirEnv, err)
		}
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
	if err := checkBinaries(dir); err != nil {
		return "", fmt.Errorf("hack/build-cluster-bins.sh finished, but %w", err)
	}
	return dir, nil
}

// EnsureHelm returns the path of the pinned helm, building it through
// `hack/build-cluster-bins.sh helm` on a cold machine (progress lines go to
// progress) without the cluster binaries or host packages, for checks that
// only render the chart. With BinDirEnv set, that directory's helm is used.
func EnsureHelm(ctx context.Context, progress io.Writer) (string, error) {
	dir := os.Getenv(BinDirEnv)
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "build-cluster-bins.sh"), HelmBinary)
		cmd.Stdout = &out
		cmd.Stderr = progress
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("building helm with hack/build-cluster-bins.sh helm: %w", err)
		}
		dir = strings.TrimSpace(out.String())
	}
	path := filepath.Join(dir, HelmBinary)
	if info, err := os.Stat(path); err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("no executable helm at %s", path)
	}
	return path, nil
}

// checkBinaries reports every file of Binaries that dir lacks or that is not
// an executable file, a missing KwokStagesFile, and a GatewayAPICRDDir
// without CRDs.
func checkBinaries(dir string) error {
	var problems []string
	for _, name := range Binaries {
		info, err := os.Stat(filepath.Join(dir, name))
		switch {
		case err != nil:
			problems = append(problems, name+" is missing")
		case !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0:
			problems = append(problems, name+" is not an executable file")
		}
	}
	if info, err := os.Stat(filepath.Join(dir, KwokStagesFile)); err != nil || !info.Mode().IsRegular() {
		problems = append(problems, KwokStagesFile+" is missing")
	}
	if crds, _ := filepath.Glob(filepath.Join(dir, GatewayAPICRDDir, "*.yaml")); len(crds) == 0 {
		problems = append(problems, GatewayAPICRDDir+" holds no CRDs")
	}
	if len(problems) > 0 {
		return fmt.Errorf("binary directory %s is incomplete: %s", dir, strings.Join(problems, "; "))
	}
	return nil
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

// EnsureModules downloads every module the tests' own builds need (the
// images' GOWORK=off build of the product module, and the workspace's),
// so that a package that runs in a network namespace of its own, with no
// route out, builds on a machine whose module cache is empty. Call it on
// the host, before isolating.
func EnsureModules(ctx context.Context, progress io.Writer) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	for _, env := range [][]string{{"GOWORK=off"}, nil} {
		cmd := exec.CommandContext(ctx, goBin, "mod", "download")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdout, cmd.Stderr = progress, progress
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go mod download %v in %s: %w", env, root, err)
		}
	}
	return nil
}
