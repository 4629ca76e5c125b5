package openapicheck

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TextSchema is the name, under components.schemas, of the schema that states the free-text
// rule (internal/freetext) in each document.
const TextSchema = "Text"

// textPatternLine is the document line that holds the rule's pattern; the comment marks it
// as generated.
var textPatternLine = regexp.MustCompile(`(?m)^(\s+pattern: )".*"( # generated from freetext\.Pattern.*)$`)

// RequireTextPattern fails t unless the document at path states pattern (freetext.Pattern)
// as components.schemas.Text.pattern. With update set, it rewrites that line of the file
// instead (go test ./cmd/walletsvc ./cmd/notifier -run TestOpenAPI -update).
func RequireTextPattern(t testing.TB, path string, doc []byte, pattern string, update bool) {
	t.Helper()
	if update {
		if !textPatternLine.Match(doc) {
			t.Fatalf("%s: no line `pattern: \"…\" # generated from freetext.Pattern` to update", path)
		}
		repl := "${1}" + strings.ReplaceAll(YAMLQuote(pattern), "$", "$$") + "${2}"
		if err := os.WriteFile(path, textPatternLine.ReplaceAll(doc, []byte(repl)), 0o644); err != nil { //nolint:gosec // a checked-in document, readable by all
			t.Fatal(err)
		}
		t.Logf("%s: text pattern written; rebuild to embed it", path)
		return
	}
	var d struct {
		Components struct {
			Schemas map[string]struct {
				Pattern string `yaml:"pattern"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(doc, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if got := d.Components.Schemas[TextSchema].Pattern; got != pattern {
		t.Errorf("%s: components.schemas.%s.pattern is not freetext.Pattern (Go's Unicode tables changed, or the rule did): run go test ./cmd/... -run TestOpenAPI -update",
			path, TextSchema)
	}
}

// YAMLQuote writes s as a YAML double-quoted scalar in ASCII: a backslash or quote escaped,
// a character beyond ASCII as the escape \uXXXX or \UXXXXXXXX (YAML's own: a parser reads
// the character itself).
func YAMLQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '\\' || r == '"':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r <= 0xFFFF:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			fmt.Fprintf(&b, `\U%08X`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
