// Package configref keeps the generated sections of docs/CONFIGURATION.md equal to what
// each binary's flags render (cli.Reference): each binary's test checks its own section, or
// with -update rewrites it.
package configref

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
)

// Regenerate is the command that rewrites every generated section.
const Regenerate = "go test ./cmd/... -run ConfigReference -update"

// Markers returns the lines that open and close the generated section name.
func Markers(name string) (begin, end string) {
	return fmt.Sprintf("<!-- BEGIN GENERATED %s: %s -->", name, Regenerate),
		fmt.Sprintf("<!-- END GENERATED %s -->", name)
}

// Splice returns doc with the section name's content replaced by section, or an error when
// doc does not hold the section's markers once each, in order.
func Splice(doc, name, section string) (string, error) {
	begin, end := Markers(name)
	i, j := strings.Index(doc, begin+"\n"), strings.Index(doc, end)
	if i < 0 || j < i || strings.Count(doc, begin) != 1 || strings.Count(doc, end) != 1 {
		return "", fmt.Errorf("no section %q: want the lines\n%s\n%s", name, begin, end)
	}
	return doc[:i+len(begin)+1] + section + doc[j:], nil
}

// Require fails t unless the generated section name of the document at path is section;
// with update it rewrites the section instead. The document is locked while it is read and
// written, since the binaries' tests run at once in their own processes.
func Require(t testing.TB, path, name, section string, update bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0) //nolint:gosec // G304: the repository's own document
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	want, err := Splice(doc, name, section)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if want == doc {
		return
	}
	if !update {
		t.Fatalf("%s: the %s section differs from the flags the binary defines; regenerate it with\n  %s\nwhat the flags render:\n%s", path, name, Regenerate, section)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(want); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s section rewritten", path, name)
}
