package kubectlelasti

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// ConnFlags are kubectl's connection flags, on every command.
type ConnFlags struct {
	Kubeconfig string
	Context    string
	Cluster    string
	User       string
	Namespace  string
}

// shortFlags maps each one-letter alias to its long flag, as kubectl has
// them.
var shortFlags = map[string]string{"n": "namespace", "A": "all-namespaces", "o": "output"}

func (c *ConnFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "Path to the kubeconfig file; else $KUBECONFIG, else ~/.kube/config.")
	fs.StringVar(&c.Context, "context", "", "The kubeconfig context to use.")
	fs.StringVar(&c.Cluster, "cluster", "", "The kubeconfig cluster to use.")
	fs.StringVar(&c.User, "user", "", "The kubeconfig user to use.")
	fs.StringVar(&c.Namespace, "namespace", "", "The namespace; else the context's namespace, else default.")
	fs.StringVar(&c.Namespace, "n", "", "")
}

// waitFlags are wake's and sleep's.
type waitFlags struct {
	wait    bool
	timeout time.Duration
}

// parseInterspersed parses fs's flags wherever they stand among args, as
// kubectl does (`wake web -n shop`), and returns the other arguments. A
// "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// normaliseShortFlags turns kubectl's joined short forms, -nshop and
// -owide, into -n=shop and -o=wide, which the flag package reads.
func normaliseShortFlags(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && (a[1] == 'n' || a[1] == 'o') && a[2] != '=' {
			a = a[:2] + "=" + a[2:]
		}
		out = append(out, a)
	}
	return out
}

// printFlags lists fs's flags kubectl's way: "-n, --namespace string".
func printFlags(w io.Writer, fs *flag.FlagSet) {
	aliases := map[string]string{}
	for short, long := range shortFlags {
		if fs.Lookup(short) != nil && fs.Lookup(long) != nil {
			aliases[long] = short
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if long, ok := shortFlags[f.Name]; ok && aliases[long] == f.Name {
			return
		}
		typ, usage := flag.UnquoteUsage(f)
		name := "    --" + f.Name
		if short, ok := aliases[f.Name]; ok {
			name = "-" + short + ", --" + f.Name
		}
		if typ != "" {
			name += " " + typ
		}
		if f.DefValue != "" && f.DefValue != "false" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "  %-32s %s\n", name, strings.TrimSpace(usage))
	})
}
