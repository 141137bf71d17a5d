// Package kubectlelasti is `kubectl elasti`, the kubectl plugin for
// ElastiServices: status, wake, sleep and explain. It follows kubectl's
// conventions (kubeconfig loading, -n, -A, -o json|yaml|wide, errors on
// stderr with a non-zero exit) with the standard flag package, and does
// nothing the operator does not also do: a wake is the scale-up
// scaletarget.Wake makes, and a sleep is a request the operator's idle
// poller carries out, resolver in front first.
package kubectlelasti

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/elasti-dev/elasti/pkg/command"
	versioned "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1
	// ExitUsage is a command line that could not be parsed, as the flag
	// package's own.
	ExitUsage = 2
)

// FieldManager names the plugin's writes.
const FieldManager = "kubectl-elasti"

// Clients are what a command talks to the cluster with.
type Clients struct {
	Elasti  versioned.Interface
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Namespace is -n, else the current context's namespace, else
	// "default".
	Namespace string
	// ServerNow estimates the apiserver's clock (see serverClock); nil
	// means the local clock.
	ServerNow func() time.Time
}

// App runs the plugin's commands. Tests replace Connect and Now.
type App struct {
	Out, Err io.Writer
	// Now is the local clock, for ages and durations shown.
	Now func() time.Time
	// Connect makes the clients the connection flags describe.
	Connect func(ConnFlags) (*Clients, error)
	// PollInterval is how often --wait reads the ElastiService again.
	PollInterval time.Duration
}

// NewApp returns an App that connects as kubectl does.
func NewApp(out, errOut io.Writer) *App {
	return &App{Out: out, Err: errOut, Now: time.Now, Connect: Connect, PollInterval: 500 * time.Millisecond}
}

// command is one subcommand.
type subcommand struct {
	name, args, summary, help string
	// bind registers the command's own flags and returns what runs it.
	bind func(a *App, fs *flag.FlagSet) func(ctx context.Context, c *Clients, args []string) error
}

func subcommands() []subcommand {
	return []subcommand{statusCommand, wakeCommand, sleepCommand, explainCommand}
}

const topUsage = `kubectl elasti shows and drives ElastiServices: what sleeps, and why.

Usage:
  kubectl elasti COMMAND [NAME] [flags]

Commands:
%s
Run "kubectl elasti COMMAND --help" for a command's flags.
`

// usageError is a command line the plugin cannot run.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// Run runs the command args name and returns the exit code. Errors go to
// a.Err as "error: ...", as kubectl prints its own.
func (a *App) Run(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		a.topUsage(a.Out)
		return ExitOK
	}
	if args[0] == "version" || args[0] == "--version" {
		fmt.Fprintln(a.Out, command.VersionLine("kubectl-elasti"))
		return ExitOK
	}
	var cmd *subcommand
	for _, c := range subcommands() {
		if c.name == args[0] {
			cmd = &c
		}
	}
	if cmd == nil {
		fmt.Fprintf(a.Err, "error: unknown command %q for \"kubectl elasti\"\n", args[0])
		a.topUsage(a.Err)
		return ExitUsage
	}
	fs := flag.NewFlagSet("kubectl elasti "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var conn ConnFlags
	conn.bind(fs)
	run := cmd.bind(a, fs)
	positional, err := parseInterspersed(fs, normaliseShortFlags(args[1:]))
	if errors.Is(err, flag.ErrHelp) {
		a.commandUsage(a.Out, cmd, fs)
		return ExitOK
	}
	if err != nil {
		fmt.Fprintf(a.Err, "error: %v\nSee 'kubectl elasti %s --help'.\n", err, cmd.name)
		return ExitUsage
	}
	clients, err := a.Connect(conn)
	if err != nil {
		fmt.Fprintf(a.Err, "error: %v\n", err)
		return ExitError
	}
	if err := run(ctx, clients, positional); err != nil {
		fmt.Fprintf(a.Err, "error: %v\n", err)
		var u usageError
		if errors.As(err, &u) {
			fmt.Fprintf(a.Err, "See 'kubectl elasti %s --help'.\n", cmd.name)
			return ExitUsage
		}
		return ExitError
	}
	return ExitOK
}

func (a *App) topUsage(w io.Writer) {
	var b strings.Builder
	for _, c := range subcommands() {
		fmt.Fprintf(&b, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(&b, "  %-8s %s\n", "version", "Print the plugin's version")
	fmt.Fprintf(w, topUsage, b.String())
}

func (a *App) commandUsage(w io.Writer, c *subcommand, fs *flag.FlagSet) {
	fmt.Fprintf(w, "%s\n\nUsage:\n  kubectl elasti %s %s[flags]\n\n%s\nFlags:\n", c.summary, c.name, c.args, c.help)
	printFlags(w, fs)
}

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
