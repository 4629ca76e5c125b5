package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	// fence matches a fenced code block, whose text is no prose to check.
	fence = regexp.MustCompile("(?ms)^\\s*```.*?^\\s*```[^\\n]*$")
	// codeSpan matches a backquoted span of prose.
	codeSpan = regexp.MustCompile("`([^`\\n]+)`")
	// mdLink matches a markdown link's target.
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// heading matches a markdown heading outside code.
	heading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)
	// testName is a Go test or fuzz target named after its package's path
	// (`e2e/TestDemoTellsTheStory`).
	testName = regexp.MustCompile(`^(Test|Fuzz)[A-Za-z0-9_]+$`)
)

// repoPathPrefixes are the top-level directories whose paths the docs name.
var repoPathPrefixes = []string{"internal/", "cmd/", "scripts/", "deploy/", "migrations/", "bench/", "chaos/", "e2e/"}

// docFiles are the documents checked: the README and every document under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return append([]string{filepath.Join(root, "README.md")}, files...)
}

// prose is a document without its fenced code blocks.
func prose(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return fence.ReplaceAllString(string(b), "")
}

// Every repository path a document names in backquotes exists: a file or a directory, a
// glob that matches one (`cmd/*/config.go`), or a test named after its package's directory
// (`e2e/TestDemoTellsTheStory`), or a package's identifier (`internal/ordering.Relay`). A template (`internal/wallet/<kind>.go`) is not a path.
func TestDocsNameOnlyPathsThatExist(t *testing.T) {
	t.Parallel()
	for _, doc := range docFiles(t) {
		rel, _ := filepath.Rel(root, doc)
		for _, m := range codeSpan.FindAllStringSubmatch(prose(t, doc), -1) {
			p := strings.Fields(m[1])[0]
			if !slices.ContainsFunc(repoPathPrefixes, func(pre string) bool { return strings.HasPrefix(p, pre) }) || strings.ContainsAny(p, "<>") {
				continue
			}
			assert.NoError(t, repoPathExists(p), "%s names `%s`", rel, m[1])
		}
	}
}

// repoPathExists reports whether the repository has the path p as the docs write it.
func repoPathExists(p string) error {
	p = strings.TrimSuffix(strings.TrimSuffix(p, "…"), "/")
	full := filepath.Join(root, filepath.FromSlash(p))
	if strings.ContainsAny(p, "*?[") {
		matches, err := filepath.Glob(full)
		if err != nil || len(matches) == 0 {
			return fmt.Errorf("no path matches %s", p)
		}
		return nil
	}
	if _, err := os.Stat(full); err == nil {
		return nil
	}
	if pkg, ident, ok := strings.Cut(filepath.Base(p), "."); ok && ident != "" && unicode.IsUpper([]rune(ident)[0]) {
		// a package's identifier: internal/ordering.Relay
		if st, err := os.Stat(filepath.Join(filepath.Dir(full), pkg)); err == nil && st.IsDir() {
			return nil
		}
	}
	dir, name := filepath.Split(full)
	if !testName.MatchString(name) {
		return fmt.Errorf("%s does not exist", p)
	}
	tests, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return err
	}
	for _, f := range tests {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), "func "+name+"(") {
			return nil
		}
	}
	return fmt.Errorf("no %s, nor a test %s in %s", p, name, filepath.Dir(p))
}

// Every relative link of a document resolves: the file or directory it names exists, and an
// anchor into a markdown document is one of its headings.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	anchors := map[string][]string{}
	anchorsOf := func(path string) []string {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := headingAnchors(prose(t, path))
		anchors[path] = a
		return a
	}
	for _, doc := range docFiles(t) {
		rel, _ := filepath.Rel(root, doc)
		for _, m := range mdLink.FindAllStringSubmatch(prose(t, doc), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), filepath.FromSlash(file))
				if _, err := os.Stat(path); err != nil {
					assert.Failf(t, "a link to nothing", "%s links to %s, which does not exist", rel, target)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(path, ".md") {
				assert.Contains(t, anchorsOf(path), frag, "%s links to %s: no such heading", rel, target)
			}
		}
	}
}

// headingAnchors are the anchors GitHub gives a document's headings: lower case, without
// punctuation, spaces as hyphens, a repeated one numbered (-1, -2, …).
func headingAnchors(doc string) []string {
	var out []string
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(doc, -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", a, n))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out
}

func TestHeadingAnchorsAreGitHubs(t *testing.T) {
	t.Parallel()
	require.Equal(t,
		[]string{"wallet-sagas-commits-and-the-relay", "what-make-demo-shows", "the-notifier-inbox-lanes-gate", "retention", "retention-1"},
		headingAnchors("## Wallet: sagas, commits and the relay\n## What `make demo` shows\n### The notifier: inbox, lanes, gate\n## Retention\n## Retention\n"))
}
