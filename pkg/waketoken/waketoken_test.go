package waketoken

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestLoadRefusesWhatCannotBeAToken(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	if _, err := Load(missing); err == nil || !strings.Contains(err.Error(), "--wake-token-file="+missing) {
		t.Errorf("missing file: %v, want an error naming the flag and path", err)
	}
	for _, c := range []struct{ name, content, want string }{
		{"empty", "", "holds no token"},
		{"blank", " \n\t\n", "holds no token"},
		{"bad", "good-token\nnot a token\n", "line 2 is not a Bearer token"},
	} {
		path := filepath.Join(dir, c.name)
		write(t, path, c.content)
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s file: %v, want an error containing %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "not a token") {
			t.Errorf("the error quotes the file's content: %v", err)
		}
	}
}

func TestVerifyAcceptsEveryTokenAndSendsTheFirst(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	path := filepath.Join(t.TempDir(), "token")
	write(t, path, "  new-token \n\nold-token\n")
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Current(ctx); got != "new-token" {
		t.Errorf("Current = %q, want the first line, trimmed", got)
	}
	for tok, want := range map[string]bool{"new-token": true, "old-token": true, "": false, "new-toke": false, "new-token ": false, "other": false} {
		if got := f.Verify(ctx, tok); got != want {
			t.Errorf("Verify(%q) = %v, want %v", tok, got, want)
		}
	}
}

// A Secret volume is updated as Kubernetes' atomic writer does it: the
// files live in a timestamped directory, ..data is a symlink to it, and the
// key's path is a symlink through ..data. An update writes a new directory
// and swaps ..data. The new token is in force at the next call.
func TestRotationThroughASecretVolumeNeedsNoRestart(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	vol := t.TempDir()
	publish := func(version, content string) {
		t.Helper()
		dir := filepath.Join(vol, "..2026_"+version)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, "token"), content)
		tmp := filepath.Join(vol, "..data_tmp")
		if err := os.Symlink(filepath.Base(dir), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(vol, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	publish("1", "token-one\n")
	path := filepath.Join(vol, "token")
	if err := os.Symlink(filepath.Join("..data", "token"), path); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Verify(ctx, "token-one") || f.Current(ctx) != "token-one" {
		t.Fatal("the first token is not in force")
	}

	// Same length, so only the file's identity tells the versions apart.
	publish("2", "token-two\n")
	if f.Verify(ctx, "token-one") || !f.Verify(ctx, "token-two") || f.Current(ctx) != "token-two" {
		t.Errorf("after rotation: old accepted %v, new accepted %v, sending %q; want only the new one",
			f.Verify(ctx, "token-one"), f.Verify(ctx, "token-two"), f.Current(ctx))
	}
}

// A file that goes away or goes bad keeps the last tokens in force: the
// endpoint neither opens up nor starts refusing the resolvers.
func TestABrokenFileKeepsTheLastTokens(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	path := filepath.Join(t.TempDir(), "token")
	write(t, path, "token-one\n")
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if !f.Verify(ctx, "token-one") || f.Current(ctx) != "token-one" || f.Verify(ctx, "") {
		t.Error("with the file gone, the last token is no longer in force")
	}
	write(t, path, "\n")
	if !f.Verify(ctx, "token-one") || f.Verify(ctx, "") {
		t.Error("with the file emptied, the last token is no longer in force")
	}
	write(t, path, "token-three-longer\n")
	if !f.Verify(ctx, "token-three-longer") || f.Verify(ctx, "token-one") {
		t.Error("a good file written after a bad one was not read")
	}
}
