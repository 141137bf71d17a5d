// Package waketoken is the optional shared secret between resolvers and the
// operator's scale endpoint. Whoever can POST to that endpoint can scale any
// fronted workload up from zero; with a token configured on both sides the
// operator answers a request without it 401.
//
// The token lives in a file, normally a key of a Secret mounted as a
// volume, and is read again when the file changes, so a rotated Secret
// takes effect without a restart. The file holds one or more tokens, one a
// line: the operator accepts any of them and a resolver sends the first,
// which lets a rotation add the new token everywhere before any resolver
// sends it.
package waketoken

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Flag and EnvFile name the setting on both binaries: the path of the
// token file. Neither is set by default, and then no token is used.
const (
	Flag    = "wake-token-file"
	EnvFile = "ELASTI_WAKE_TOKEN_FILE"
)

const (
	// maxFileBytes bounds what is read; a token file is a few lines.
	maxFileBytes = 64 << 10
	// rereadAfter forces a read even when stat shows no change: a file
	// rewritten in place within the file system's timestamp granularity,
	// at the same size, looks unchanged. Kubernetes replaces Secret files
	// rather than rewriting them, which stat always notices.
	rereadAfter = time.Minute
)

// token68 is the syntax RFC 6750 allows for a Bearer token; anything else
// could not be sent in an Authorization header unchanged.
var token68 = regexp.MustCompile(`^[A-Za-z0-9\-._~+/]+=*$`)

// File is a token file, re-read when it changes. Its methods are safe for
// concurrent use.
type File struct {
	path string

	mu sync.Mutex
	// info is the stat of the file the tokens were read from.
	info   os.FileInfo
	readAt time.Time
	first  string
	// digests are the SHA-256 of every token: comparing digests of equal
	// length keeps the comparison's time independent of the token's length.
	digests [][sha256.Size]byte
	// failed is the last reload error, logged once rather than on every
	// request while it lasts.
	failed string
}

// Load reads the token file at path. A file that is missing, unreadable or
// holds no token is an error: a token was asked for, and running without
// one would leave the endpoint open or every wake refused.
func Load(path string) (*File, error) {
	f := &File{path: path}
	info, tokens, err := read(path)
	if err != nil {
		return nil, fmt.Errorf("--%s=%s: %w", Flag, path, err)
	}
	f.set(info, tokens)
	return f, nil
}

// Path returns the file's path.
func (f *File) Path() string { return f.path }

// Current returns the token to send: the file's first.
func (f *File) Current(ctx context.Context) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refreshLocked(ctx)
	return f.first
}

// Verify reports whether token is one of the file's tokens, in time that
// does not depend on where a wrong token differs from a right one.
func (f *File) Verify(ctx context.Context, token string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refreshLocked(ctx)
	got := sha256.Sum256([]byte(token))
	match := 0
	for _, want := range f.digests {
		// No early exit: every token is compared.
		match |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	return match == 1
}

// refreshLocked re-reads the file if it changed. If it cannot, the tokens
// read last stay in force: a Secret being replaced, or deleted by mistake,
// must neither open the endpoint nor refuse every wake.
func (f *File) refreshLocked(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("file", f.path)
	info, err := os.Stat(f.path)
	if err == nil && sameFile(f.info, info) && time.Since(f.readAt) < rereadAfter {
		return
	}
	var tokens []string
	if err == nil {
		info, tokens, err = read(f.path)
	}
	if err != nil {
		if err.Error() != f.failed {
			f.failed = err.Error()
			logger.Error(err, "Cannot re-read the wake token file; keeping the token(s) read before")
		}
		return
	}
	if f.failed != "" || !sameFile(f.info, info) {
		logger.V(2).Info("Read the wake token file", "tokens", len(tokens))
	}
	f.failed = ""
	f.set(info, tokens)
}

func (f *File) set(info os.FileInfo, tokens []string) {
	f.info, f.readAt, f.first = info, time.Now(), tokens[0]
	f.digests = f.digests[:0]
	for _, t := range tokens {
		f.digests = append(f.digests, sha256.Sum256([]byte(t)))
	}
}

// sameFile reports whether b is the file a was, unchanged as far as stat
// can tell.
func sameFile(a, b os.FileInfo) bool {
	return a != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// read returns the stat of the file it read and its tokens: one a line,
// surrounding white space and blank lines ignored. Errors never quote the
// file's content.
func read(path string) (os.FileInfo, []string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = fh.Close() }()
	// The stat of the open file describes exactly the bytes read below.
	info, err := fh.Stat()
	if err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(io.LimitReader(fh, maxFileBytes+1))
	if err != nil {
		return nil, nil, err
	}
	if len(data) > maxFileBytes {
		return nil, nil, fmt.Errorf("larger than %d bytes; it should hold a few tokens, one a line", maxFileBytes)
	}
	var tokens []string
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if !token68.Match(line) {
			return nil, nil, fmt.Errorf("line %d is not a Bearer token (letters, digits and -._~+/, then optional =); "+
				"generate one with: openssl rand -hex 32", i+1)
		}
		tokens = append(tokens, string(line))
	}
	if len(tokens) == 0 {
		return nil, nil, errors.New("holds no token; put one in it, e.g. the output of: openssl rand -hex 32")
	}
	return info, tokens, nil
}
