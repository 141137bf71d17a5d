package realnet

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// Environment of a client pod's process that runs a Program.
const (
	programEnv        = "ELASTI_REALNET_CLIENT_PROGRAM"
	programArgEnv     = "ELASTI_REALNET_CLIENT_PROGRAM_ARG"
	programTimeoutEnv = "ELASTI_REALNET_CLIENT_PROGRAM_TIMEOUT"
)

// A Program is test code that runs inside a client pod, for exchanges a
// Request cannot describe: a body streamed for as long as it takes, a
// WebSocket conversation. It runs in the binary that registered it,
// re-executed in the client's sandbox like Do's requests, so names resolve
// through the pod's resolv.conf and every connection leaves from the pod.
// arg is what Run was given, as JSON; the result is sent back as JSON. A
// Program must respect ctx, which ends at Run's timeout.
type Program func(ctx context.Context, arg json.RawMessage) (any, error)

var (
	programsMu sync.Mutex
	programs   = map[string]Program{}
)

// RegisterProgram makes p runnable by name in client pods. Register from an
// init function, so the re-executed binary knows p when ClientMain runs.
func RegisterProgram(name string, p Program) {
	programsMu.Lock()
	defer programsMu.Unlock()
	if _, dup := programs[name]; dup {
		panic("realnet: program " + name + " registered twice")
	}
	programs[name] = p
}

// programOutput is what a program's process prints.
type programOutput struct {
	Result json.RawMessage `json:"result,omitempty"`
	Err    string          `json:"err,omitempty"`
}

// Run runs the registered program name in the client pod with arg, for at
// most timeout, and decodes its result into result (a pointer; nil
// discards it). The error covers the harness and the program's own error.
func (c *Client) Run(ctx context.Context, name string, arg any, timeout time.Duration, result any) error {
	spec, err := json.Marshal(arg)
	if err != nil {
		return err
	}
	// The program's own timeout ends it first; the margin is for the
	// process to start and report.
	stdout, stderr, err := c.exec(ctx, timeout+10*time.Second,
		programEnv+"="+name, programArgEnv+"="+string(spec), programTimeoutEnv+"="+timeout.String())
	if err != nil {
		return err
	}
	var out programOutput
	if err := json.Unmarshal(stdout, &out); err != nil {
		return fmt.Errorf("client pod %s: program %s: bad answer %q: %w (stderr %s)", c.sandbox.Name, name, stdout, err, stderr)
	}
	if out.Err != "" {
		return fmt.Errorf("client pod %s: program %s: %s", c.sandbox.Name, name, out.Err)
	}
	if result == nil || len(out.Result) == 0 {
		return nil
	}
	return json.Unmarshal(out.Result, result)
}

// runProgram runs the program the environment names, prints its output
// and exits. It is ClientMain's half for programs.
func runProgram(name string) {
	programsMu.Lock()
	p, ok := programs[name]
	programsMu.Unlock()
	if !ok {
		fmt.Fprintf(os.Stderr, "realnet: no program %q registered in this binary\n", name)
		os.Exit(2)
	}
	timeout, err := time.ParseDuration(os.Getenv(programTimeoutEnv))
	if err != nil {
		fmt.Fprintf(os.Stderr, "realnet: program %s: bad timeout: %v\n", name, err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	res, err := p(ctx, json.RawMessage(os.Getenv(programArgEnv)))
	cancel()
	var out programOutput
	if err != nil {
		out.Err = err.Error()
	} else if out.Result, err = json.Marshal(res); err != nil {
		out.Err = fmt.Sprintf("encoding the result: %v", err)
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
	os.Exit(0)
}
