package command

import (
	"fmt"
	"strconv"
	"time"

	"github.com/elasti-dev/elasti/pkg/portalloc"
)

// Env reads flag defaults from KubeElasti's environment variables and
// collects every bad value in Errs, so one run reports them all instead of
// stopping at the first (or panicking, as KubeElasti does).
type Env struct {
	Getenv func(string) string
	Errs   []error
}

// String returns the variable, or def when it is unset or empty.
func (e *Env) String(name, def string) string {
	if v := e.Getenv(name); v != "" {
		return v
	}
	return def
}

// Port returns the variable as a TCP port, or def when unset.
func (e *Env) Port(name string, def int) int {
	v := e.Getenv(name)
	if v == "" {
		return def
	}
	p, err := strconv.Atoi(v)
	if err != nil || !portalloc.IsPort(p) {
		e.Errs = append(e.Errs, fmt.Errorf("%s=%q is not a TCP port (1-65535)", name, v))
		return def
	}
	return p
}

// Duration returns the variable as a positive Go duration, or def when unset.
func (e *Env) Duration(name string, def time.Duration) time.Duration {
	v := e.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		e.Errs = append(e.Errs, fmt.Errorf("%s=%q is not a positive Go duration such as 30s", name, v))
		return def
	}
	return d
}

// Seconds reads KubeElasti's whole-second values ("120") and also accepts
// Go durations ("2m").
func (e *Env) Seconds(name string, def time.Duration) time.Duration {
	v := e.Getenv(name)
	if v == "" {
		return def
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	e.Errs = append(e.Errs, fmt.Errorf("%s=%q is neither whole seconds nor a positive Go duration", name, v))
	return def
}
