// Package cli holds what both binaries' wiring shares: flags whose defaults come from
// environment variables of the same name, the slog logger, and validation messages that name
// the field at fault. Only cmd/ calls it; nothing below cmd/ reads the environment.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/walletsaga/walletsaga/internal/reqid"
)

// Flags binds flags named like environment variables (DATABASE_URL, HTTP_ADDR, …); each
// flag's default is the variable's value when set, else the built-in default.
type Flags struct {
	fs     *flag.FlagSet
	getenv func(string) string
	errs   []error
}

// NewFlags returns a flag set that reads defaults through getenv.
func NewFlags(name string, getenv func(string) string, out io.Writer) *Flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	return &Flags{fs: fs, getenv: getenv}
}

// FlagSet exposes the underlying set (for Usage, Args).
func (f *Flags) FlagSet() *flag.FlagSet { return f.fs }

// String binds a string.
func (f *Flags) String(p *string, name, def, usage string) {
	if v := f.getenv(name); v != "" {
		def = v
	}
	f.fs.StringVar(p, name, def, usage+" (env "+name+")")
}

// Secret binds a secret string: like String, but neither the environment's value nor the
// default is ever shown (not in -h, not in error messages).
func (f *Flags) Secret(p *string, name, usage string) {
	*p = f.getenv(name)
	f.fs.Var(secretValue{p}, name, usage+" (env "+name+"; never shown)")
}

// secretValue is a flag.Value whose String never reveals the value.
type secretValue struct{ p *string }

func (s secretValue) String() string {
	return ""
}

func (s secretValue) Set(v string) error {
	*s.p = v
	return nil
}

// ReadSecret returns the secret in file (trimmed) when file is set, else value. field names
// the setting in errors; the secret itself never appears in them.
func ReadSecret(field, value, file string) (string, error) {
	if file == "" {
		return value, nil
	}
	b, err := os.ReadFile(file) //nolint:gosec // G304: the operator names the file (…_TOKEN_FILE); reading it is the point
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Int binds an int.
func (f *Flags) Int(p *int, name string, def int, usage string) {
	if v := f.getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			f.errs = append(f.errs, fmt.Errorf("%s: %q is not an integer", name, v))
		} else {
			def = n
		}
	}
	f.fs.IntVar(p, name, def, usage+" (env "+name+")")
}

// Bool binds a bool.
func (f *Flags) Bool(p *bool, name string, def bool, usage string) {
	if v := f.getenv(name); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			f.errs = append(f.errs, fmt.Errorf("%s: %q is not a boolean", name, v))
		} else {
			def = b
		}
	}
	f.fs.BoolVar(p, name, def, usage+" (env "+name+")")
}

// Duration binds a duration ("500ms", "5s").
func (f *Flags) Duration(p *time.Duration, name string, def time.Duration, usage string) {
	if v := f.getenv(name); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			f.errs = append(f.errs, fmt.Errorf("%s: %q is not a duration", name, v))
		} else {
			def = d
		}
	}
	f.fs.DurationVar(p, name, def, usage+" (env "+name+")")
}

// Parse parses args and returns the environment errors met while binding, if any.
func (f *Flags) Parse(args []string) error {
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	return errors.Join(f.errs...)
}

// Problems collects validation failures, each naming its field.
type Problems []string

// Addf records a problem with field.
func (p *Problems) Addf(field, format string, args ...any) {
	*p = append(*p, field+": "+fmt.Sprintf(format, args...))
}

// Err returns nil or one error listing every problem.
func (p Problems) Err() error {
	if len(p) == 0 {
		return nil
	}
	return errors.New("invalid configuration: " + strings.Join(p, "; "))
}

// CheckPostgresURL validates a DATABASE_URL.
func (p *Problems) CheckPostgresURL(field, v string) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		p.Addf(field, "must be a postgres:// URL with a host, got %q", Redact(v))
	}
}

// CheckHostPort validates a host:port list (comma-separated when many is true).
func (p *Problems) CheckHostPort(field, v string, many bool) {
	parts := []string{v}
	if many {
		parts = strings.Split(v, ",")
	}
	for _, s := range parts {
		if _, port, err := net.SplitHostPort(strings.TrimSpace(s)); err != nil || port == "" {
			p.Addf(field, "must be host:port, got %q", s)
		}
	}
}

// CheckName validates a topic or group name (RocketMQ: letters, digits, %, -, _, |; ≤ 127).
func (p *Problems) CheckName(field, v string) {
	if v == "" || len(v) > 127 {
		p.Addf(field, "must be 1–127 characters, got %q", v)
		return
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("%-_|", r)) {
			p.Addf(field, "may hold only letters, digits, %%, -, _ and |, got %q", v)
			return
		}
	}
}

// Redact hides the password of a URL for messages and logs.
func Redact(v string) string {
	u, err := url.Parse(v)
	if err != nil {
		return "(unparseable)"
	}
	return u.Redacted()
}

// Logger returns a slog logger: JSON when format is "json", text otherwise. Records logged
// with a request's context carry its request_id (see reqid).
func Logger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("LOG_LEVEL: %q is not debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(reqid.Handler(slog.NewJSONHandler(w, opts))), nil
	case "text", "":
		return slog.New(reqid.Handler(slog.NewTextHandler(w, opts))), nil
	}
	return nil, fmt.Errorf("LOG_FORMAT: %q is not text or json", format)
}

// SplitList splits a comma-separated list, trimming blanks.
func SplitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Getenv is os.Getenv, for main functions to pass to run.
var Getenv = os.Getenv

// WriteAddrFile writes addr and a newline to path, whole or not at all (a temporary file
// renamed over it), for HTTP_ADDR_FILE: a program told to listen on port 0 tells whoever
// started it which port it got. An empty path writes nothing.
func WriteAddrFile(path string, addr net.Addr) error {
	if path == "" {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(addr.String()+"\n"), 0o600); err != nil {
		return fmt.Errorf("HTTP_ADDR_FILE: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("HTTP_ADDR_FILE: %w", err)
	}
	return nil
}
