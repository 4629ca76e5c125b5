package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/walletsaga/walletsaga/internal/redact"
)

// capture is the output Reference hands a binary's flag binding: NewFlags given one records
// the flags it returns, and the usage written to it is dropped.
type capture struct{ flags *Flags }

func (*capture) Write(p []byte) (int, error) { return len(p), nil }

// Reference renders the markdown reference of one binary's settings from its own flag
// definitions: a heading, title, then a row per setting with its flag, its environment
// variable, its default in production and in dev, and its usage as -h gives it. bind is
// called once per mode with that mode's environment (nothing set but WALLETSAGA_ENV, so the
// machine's own environment never shows) and must build its flags with NewFlags writing to
// out; whatever else it does with them (production refuses the empty configuration) is
// ignored. A secret's row says where it is read from, never a value, and a URL shows its
// passwords and keys masked (maskURLs).
func Reference(title string, bind func(getenv func(string) string, out io.Writer)) (string, error) {
	bound := map[Mode]*Flags{}
	for _, mode := range []Mode{Production, Dev} {
		c := &capture{}
		bind(func(k string) string {
			if k == ModeEnv {
				return string(mode)
			}
			return ""
		}, c)
		if c.flags == nil {
			return "", fmt.Errorf("%s: no flags were built with NewFlags on the output given", title)
		}
		bound[mode] = c.flags
	}
	prod, dev := bound[Production], bound[Dev]
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", title)
	b.WriteString("| flag | environment | production default | dev default | what it sets |\n")
	b.WriteString("|---|---|---|---|---|\n")
	var problems []string
	prod.fs.VisitAll(func(fl *flag.Flag) {
		env := strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
		if isSecretFile(prod.fs, fl.Name) {
			return // in its secret's row
		}
		devFl := dev.fs.Lookup(fl.Name)
		if devFl == nil {
			problems = append(problems, "--"+fl.Name+" is bound in production only")
			return
		}
		if r, ok := fl.Value.(refusedSecret); ok {
			devDefault := "none"
			if devFl.Value.(refusedSecret).devDefault {
				devDefault = "a documented dev value"
			}
			fmt.Fprintf(&b, "| `--%s-file` | `%s` or `%s_FILE` | none | %s | **secret**, from the environment or the file only: %s |\n",
				fl.Name, r.env, r.env, devDefault, cell(r.usage))
			return
		}
		_, usage := flag.UnquoteUsage(fl)
		envCell := "`" + env + "`"
		if trimmed, ok := strings.CutSuffix(usage, " (env "+env+")"); ok {
			usage = trimmed
		} else {
			envCell = "—"
		}
		prodDefault := value(fl.DefValue)
		if fl.DefValue == "" && prod.required[env] {
			prodDefault = "**required**"
		}
		devDefault := devFl.DefValue
		if devDefault == "" {
			devDefault = dev.defaults[env]
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s | %s |\n", fl.Name, envCell, prodDefault, value(devDefault), cell(usage))
	})
	dev.fs.VisitAll(func(fl *flag.Flag) {
		if prod.fs.Lookup(fl.Name) == nil {
			problems = append(problems, "--"+fl.Name+" is bound in dev only")
		}
	})
	if len(problems) > 0 {
		return "", fmt.Errorf("%s: %s", title, strings.Join(problems, "; "))
	}
	return b.String(), nil
}

// isSecretFile reports whether the flag name is the file of a secret (--read-token-file of
// READ_TOKEN).
func isSecretFile(fs *flag.FlagSet, name string) bool {
	base, ok := strings.CutSuffix(name, "-file")
	if !ok {
		return false
	}
	fl := fs.Lookup(base)
	if fl == nil {
		return false
	}
	_, ok = fl.Value.(refusedSecret)
	return ok
}

// value is a default as the reference shows it: code, or "none" for an empty one.
func value(v string) string {
	if v == "" {
		return "none"
	}
	return "`" + strings.ReplaceAll(maskURLs(v), "|", `\|`) + "`"
}

// cell is text fit for a markdown table cell, with URLs' passwords masked.
func cell(s string) string {
	return strings.ReplaceAll(maskURLs(s), "|", `\|`)
}

// maskURLs returns s (a usage, a default) with every URL in it shown as redact.URL shows
// it, for -h and the reference: a password or a key in a default, or in the value the
// environment gave, never reaches the terminal or the documents.
func maskURLs(s string) string {
	for _, w := range strings.Fields(s) {
		w = strings.TrimRight(w, ",;)")
		if !strings.Contains(w, "://") {
			continue
		}
		if shown := redact.URL(w); shown != w {
			s = strings.ReplaceAll(s, w, shown)
		}
	}
	return s
}
