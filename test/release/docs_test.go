package release_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// readmeTestName is a test or benchmark the README names as proof of a
// claim, in backquotes.
var readmeTestName = regexp.MustCompile("`((?:Test|Benchmark)[A-Z][A-Za-z0-9_]*)`")

// Every test and benchmark the README and docs/ cite (the Security table's
// "proved by" column, among others) exists, so a renamed or deleted test
// cannot leave a claim that nothing proves.
func TestReadmeCitesOnlyTestsThatExist(t *testing.T) {
	pages := markdownPages(t)
	defined := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range regexp.MustCompile(`(?m)^func ((?:Test|Benchmark)\w+)\(`).FindAllSubmatch(src, -1) {
			defined[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cited := 0
	for _, page := range pages {
		for _, m := range readmeTestName.FindAllStringSubmatch(page.text, -1) {
			cited++
			if !defined[m[1]] {
				t.Errorf("%s cites %s, which no _test.go defines", page.path, m[1])
			}
		}
	}
	if cited < 50 {
		t.Fatalf("the docs cite only %d tests; the pattern or the page list is broken", cited)
	}
}

// markdownPage is one of the project's Markdown files, by its path from the
// repository root.
type markdownPage struct {
	path, text string
}

// markdownPages returns the README, the project files beside it and every
// page under docs/.
func markdownPages(t *testing.T) []markdownPage {
	t.Helper()
	var pages []markdownPage
	add := func(rel string) {
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, markdownPage{path: rel, text: string(data)})
	}
	for _, rel := range []string{"README.md", "CONTRIBUTING.md", "SECURITY.md", "CHANGELOG.md", "deploy/README.md"} {
		add(rel)
	}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		add(filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

// mdLink is an inline Markdown link or image: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// fencedCode is a fenced code block, whose brackets are no links.
var fencedCode = regexp.MustCompile("(?ms)^```.*?^```")

// links returns the relative targets a page links to, code blocks and
// inline code left out.
func links(text string) []string {
	text = fencedCode.ReplaceAllString(text, "")
	text = regexp.MustCompile("`[^`\n]*`").ReplaceAllString(text, "")
	var out []string
	for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		out = append(out, target)
	}
	return out
}

// anchors returns the GitHub-style anchors of a page's headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	text = fencedCode.ReplaceAllString(text, "")
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ' || r == '-':
				b.WriteRune('-')
			case r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// No relative link in the README, the project files or docs/ is broken: its
// file exists, and so does the heading its #anchor names.
func TestDocsLinksResolve(t *testing.T) {
	pages := markdownPages(t)
	byPath := map[string]string{}
	for _, p := range pages {
		byPath[p.path] = p.text
	}
	checked := 0
	for _, p := range pages {
		for _, target := range links(p.text) {
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			dest := p.path
			if file != "" {
				dest = filepath.ToSlash(filepath.Join(filepath.Dir(p.path), file))
				if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
					t.Errorf("%s links to %s, which does not exist", p.path, target)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			text, ok := byPath[dest]
			if !ok {
				data, err := os.ReadFile(filepath.Join(root, dest))
				if err != nil {
					t.Errorf("%s links to %s: %v", p.path, target, err)
					continue
				}
				text = string(data)
			}
			if !anchors(text)[anchor] {
				t.Errorf("%s links to %s, but %s has no heading #%s", p.path, target, dest, anchor)
			}
		}
	}
	if checked < 40 {
		t.Fatalf("only %d links checked: the link pattern is broken", checked)
	}
}

// Every page under docs/ is reachable from docs/README.md by links.
func TestEveryDocsPageIsReachableFromTheIndex(t *testing.T) {
	pages := markdownPages(t)
	byPath := map[string]string{}
	for _, p := range pages {
		byPath[p.path] = p.text
	}
	reached := map[string]bool{"docs/README.md": true}
	queue := []string{"docs/README.md"}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, target := range links(byPath[cur]) {
			file, _, _ := strings.Cut(target, "#")
			if file == "" {
				continue
			}
			dest := filepath.ToSlash(filepath.Join(filepath.Dir(cur), file))
			if _, ok := byPath[dest]; ok && !reached[dest] {
				reached[dest] = true
				queue = append(queue, dest)
			}
		}
	}
	for _, p := range pages {
		if strings.HasPrefix(p.path, "docs/") && !reached[p.path] {
			t.Errorf("%s is not reachable from docs/README.md", p.path)
		}
	}
}
