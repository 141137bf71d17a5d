package command

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// KubeconfigUsage is the help text of both binaries' --kubeconfig flag.
const KubeconfigUsage = "Path to a kubeconfig. When empty: the files in $KUBECONFIG, else ~/.kube/config, else the in-cluster configuration."

// RestConfig returns the Kubernetes client configuration by client-go's
// default loading rules, as kubectl finds it: the kubeconfig at
// explicitPath (the --kubeconfig flag) if set, else the files $KUBECONFIG
// lists, else ~/.kube/config, and when none of them configures a server,
// the in-cluster configuration of a pod's service account.
func RestConfig(explicitPath string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = explicitPath
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	switch {
	case err == nil:
		return cfg, nil
	case clientcmd.IsEmptyConfig(err):
		return nil, fmt.Errorf("no Kubernetes client configuration: not running in a cluster, and no kubeconfig in $KUBECONFIG or ~/.kube/config; " +
			"pass --kubeconfig=PATH or set KUBECONFIG=PATH")
	case explicitPath != "":
		return nil, fmt.Errorf("kubernetes client configuration from --kubeconfig=%s: %w", explicitPath, err)
	default:
		return nil, fmt.Errorf("kubernetes client configuration (from KUBECONFIG, else ~/.kube/config, else in-cluster; --kubeconfig=PATH chooses one): %w", err)
	}
}
