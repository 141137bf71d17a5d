package main

import (
	"context"

	"k8s.io/client-go/rest"

	"github.com/elasti-dev/elasti/pkg/operator"
)

// releaseParallelism is how many ElastiServices --release-all releases at
// once: each mostly waits for its target's pod, and a handful at a time
// keeps the writes to the apiserver modest.
const releaseParallelism = 16

// releaseAll is --release-all: helm uninstall's pre-delete hook runs it
// (charts/elasti/templates/uninstall-hook.yaml), with the operator's own
// flags and environment, so it finds the same Lease, Deployment, resolver
// and watched namespace. Its exit status is the hook's result.
func releaseAll(ctx context.Context, cfg *rest.Config, o *options, op *operator.Operator) error {
	ctx, cancel := context.WithTimeout(ctx, o.releaseTimeout)
	defer cancel()
	lock, err := operator.NewLeaseLock(cfg, o.leaderElectNamespace, o.leaderElectName, o.renewDeadline)
	if err != nil {
		return err
	}
	return op.ReleaseAllLeading(ctx, operator.Uninstall{
		OperatorNamespace:  o.leaderElectNamespace,
		OperatorDeployment: o.operatorDeployment,
		Election: &operator.Election{
			Lock:          lock,
			LeaseDuration: o.leaseDuration,
			RenewDeadline: o.renewDeadline,
			RetryPeriod:   o.retryPeriod,
		},
		Parallelism: releaseParallelism,
	})
}
