package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/elasti-dev/elasti/test/benchresults"
)

// mergeRun records the benchmarks of go test's output in the results file
// with this run's date, commit, machine and load.
func mergeRun(output, results, command, loadBefore, only string) error {
	in, err := os.Open(output)
	if err != nil {
		return err
	}
	defer in.Close()
	parsed, err := benchresults.Parse(in)
	if err != nil {
		return err
	}
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			return fmt.Errorf("-only: %w", err)
		}
		for name := range parsed {
			if !re.MatchString(name) {
				delete(parsed, name)
			}
		}
	}
	if len(parsed) == 0 {
		return fmt.Errorf("%s: no benchmark of a package that passed (-only %q)", output, only)
	}
	f, err := benchresults.Read(results)
	if err != nil {
		return err
	}
	load := "not taken"
	if loadBefore != "" {
		b, err := os.ReadFile(loadBefore)
		if err != nil {
			return err
		}
		if fields := strings.Fields(string(b)); len(fields) >= 3 {
			load = strings.Join(fields[:3], " ")
		}
	}
	// The run ended when go test last wrote its output.
	ended := time.Now()
	if st, err := in.Stat(); err == nil {
		ended = st.ModTime()
	}
	names := f.Merge(parsed, benchresults.Run{
		Date: ended.UTC().Format(time.RFC3339), Commit: commit(), Machine: machine(), Load: load, Command: command,
	})
	if err := f.Write(results); err != nil {
		return err
	}
	fmt.Printf("benchplot: recorded %s in %s\n", strings.Join(names, ", "), results)
	return nil
}

// writePage rewrites page's results table from the results file.
func writePage(page, results string) error {
	f, err := benchresults.Read(results)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(page)
	if err != nil {
		return err
	}
	out, err := benchresults.Replace(string(b), benchresults.Table(f))
	if err != nil {
		return fmt.Errorf("%s: %w", page, err)
	}
	return os.WriteFile(page, []byte(out), 0o644)
}

// commit is the tree's short commit, "-dirty" when it has changes.
func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += "-dirty"
	}
	return c
}

// machine says the machine's cores, CPU model, memory and kernel.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				mem = fmt.Sprintf(", %d GiB", (kb+1<<19)>>20)
			}
		}
	}
	kernel := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = ", Linux " + strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%d cores (%s)%s%s", runtime.NumCPU(), model, mem, kernel)
}
