// Package kubectlelasti is `kubectl elasti`, the kubectl plugin for
// ElastiServices: status, wake, sleep and explain. It is built on kubectl's
// own libraries, as kubectl plugins are: spf13/cobra for commands, flags
// and shell completion, k8s.io/cli-runtime's ConfigFlags for every
// connection and auth flag (--kubeconfig, --context, -n, --as, --token,
// --server, --request-timeout, ...) and its printers for -o. It does
// nothing the operator does not also do: a wake is the scale-up
// scaletarget.Wake makes, and a sleep is a request the operator's idle
// poller carries out, resolver in front first.
package kubectlelasti

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/elasti-dev/elasti/pkg/command"
	versioned "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1
	// ExitUsage is a command line that could not be parsed.
	ExitUsage = 2
)

// FieldManager names the plugin's writes.
const FieldManager = "kubectl-elasti"

// Clients are what a command talks to the cluster with.
type Clients struct {
	Elasti  versioned.Interface
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// ElastiWatch serves watches. Elasti's requests are bounded by a
	// timeout that would cut a watch short; this one's are not. Nil:
	// Elasti.
	ElastiWatch versioned.Interface
	// WatchTimeout is --request-timeout when given: how long status
	// --watch watches. Zero: until interrupted.
	WatchTimeout time.Duration
	// Namespace is -n, else the current context's namespace, else
	// "default".
	Namespace string
	// ServerNow estimates the apiserver's clock (see serverClock); nil
	// means the local clock.
	ServerNow func() time.Time
}

// watcher is the clientset watches go through.
func (c *Clients) watcher() versioned.Interface {
	if c.ElastiWatch != nil {
		return c.ElastiWatch
	}
	return c.Elasti
}

// App runs the plugin's commands. Tests replace Connect and Now.
type App struct {
	Out, Err io.Writer
	// Now is the local clock, for ages and durations shown.
	Now func() time.Time
	// Connect makes the clients kubectl's flags describe.
	Connect func(*genericclioptions.ConfigFlags) (*Clients, error)
}

// NewApp returns an App that connects as kubectl does.
func NewApp(out, errOut io.Writer) *App {
	return &App{Out: out, Err: errOut, Now: time.Now, Connect: Connect}
}

// DisplayName is how the user runs the plugin.
const DisplayName = "kubectl elasti"

// usageError is a command line the plugin cannot run.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// session is one run's commands and the flags they parsed.
type session struct {
	app   *App
	flags *genericclioptions.ConfigFlags
}

// clients connects with the parsed flags.
func (s *session) clients() (*Clients, error) { return s.app.Connect(s.flags) }

// Run runs the command line args and returns the exit code. Errors go to
// a.Err as "error: ...", as kubectl prints its own.
//
// Everything it prints goes through a terminalWriter: what it shows comes
// from objects any namespace's users write.
func (a *App) Run(ctx context.Context, args []string) int {
	out, errOut := newTerminalWriter(a.Out), newTerminalWriter(a.Err)
	defer func() { _ = out.Flush(); _ = errOut.Flush() }()
	safe := *a
	safe.Out, safe.Err = out, errOut
	return safe.run(ctx, args)
}

func (a *App) run(ctx context.Context, args []string) int {
	root := a.Command()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(a.Err, "error: %v\n", err)
	var u usageError
	if !errors.As(err, &u) {
		return ExitError
	}
	if cmd == nil {
		cmd = root
	}
	fmt.Fprintf(a.Err, "See '%s --help'.\n", cmd.CommandPath())
	return ExitUsage
}

// Command is the plugin's root command: kubectl's connection flags on
// every subcommand, cobra's completion and help.
func (a *App) Command() *cobra.Command {
	s := &session{app: a, flags: genericclioptions.NewConfigFlags(true)}
	root := &cobra.Command{
		// The binary's name, which completion scripts register; usage
		// and help show DisplayName.
		Use:         "kubectl-elasti",
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: DisplayName},
		Short:       "Show and drive ElastiServices: what sleeps, and why",
		Long:        "kubectl elasti shows and drives ElastiServices: what sleeps, and why.",
		Version:     command.Version(),
		Args:        cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Sprintf("unknown command %q for %q", args[0], DisplayName)}
			}
			return cmd.Help()
		},
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(a.Out)
	root.SetErr(a.Err)
	root.SetVersionTemplate(command.VersionLine("kubectl-elasti") + "\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err.Error()} })
	s.flags.AddFlags(root.PersistentFlags())
	_ = root.RegisterFlagCompletionFunc("namespace", s.completeNamespaces)
	_ = root.RegisterFlagCompletionFunc("context", s.completeContexts)
	root.AddCommand(s.statusCommand(), s.wakeCommand(), s.sleepCommand(), s.explainCommand(), &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), command.VersionLine("kubectl-elasti"))
		},
	})
	return root
}

// subcommand is the cobra command for one of the plugin's verbs; run gets
// the clients the connection flags describe.
func (s *session) subcommand(use, short, long string, completeNames func(args []string) bool,
	run func(ctx context.Context, c *Clients, args []string) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Long:  short + ".\n\n" + long,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := s.clients()
			if err != nil {
				return err
			}
			return run(cmd.Context(), c, args)
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if !completeNames(args) {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return s.completeNames(cmd.Context(), args, toComplete)
		},
	}
}

// completeNames lists the ElastiServices in the namespace whose names
// start with toComplete, those in args left out: the NAME arguments'
// completion.
func (s *session) completeNames(ctx context.Context, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	c, err := s.clients()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError | cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	list, err := c.Elasti.ElastiV1alpha1().ElastiServices(c.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveError | cobra.ShellCompDirectiveNoFileComp
	}
	var names []cobra.Completion
	for _, es := range list.Items {
		if strings.HasPrefix(es.Name, toComplete) && !slices.Contains(args, es.Name) {
			names = append(names, es.Name)
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// completeNamespaces lists the cluster's namespaces, for -n.
func (s *session) completeNamespaces(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	c, err := s.clients()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError | cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	list, err := c.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveError | cobra.ShellCompDirectiveNoFileComp
	}
	var names []cobra.Completion
	for _, ns := range list.Items {
		if strings.HasPrefix(ns.Name, toComplete) {
			names = append(names, ns.Name)
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// completeContexts lists the kubeconfig's contexts, for --context.
func (s *session) completeContexts(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	cfg, err := s.flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError | cobra.ShellCompDirectiveNoFileComp
	}
	var names []cobra.Completion
	for name := range cfg.Contexts {
		if strings.HasPrefix(name, toComplete) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, cobra.ShellCompDirectiveNoFileComp
}

// completionTimeout bounds the list a <TAB> waits for.
const completionTimeout = 5 * time.Second

// oneName is the NAME argument of wake, sleep and explain.
func oneName(args []string) (string, error) {
	switch len(args) {
	case 0:
		return "", usageError{"NAME is required: the ElastiService to act on"}
	case 1:
		return args[0], nil
	}
	return "", usageError{fmt.Sprintf("one NAME expected, got %d: %s", len(args), strings.Join(args, " "))}
}

// noName completes the NAME of a command that takes one, until it has it.
func noName(args []string) bool { return len(args) == 0 }

// anyNames completes any number of NAMEs.
func anyNames([]string) bool { return true }
