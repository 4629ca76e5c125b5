// Package cli holds what both binaries' wiring shares: flags whose defaults come from
// environment variables of the same name, the slog logger, and validation messages that name
// the field at fault. Only cmd/ calls it; nothing below cmd/ reads the environment.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/buildinfo"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/redact"
	"github.com/walletsaga/walletsaga/internal/reqid"
	"github.com/walletsaga/walletsaga/internal/retention"
	"github.com/walletsaga/walletsaga/internal/telemetry"
)

// ModeEnv names the environment variable that says how a binary runs.
const ModeEnv = "WALLETSAGA_ENV"

// Mode is how a binary runs: Production (the default, whenever WALLETSAGA_ENV is unset) or
// Dev, which the demo, the tests, the bench and the chaos run ask for explicitly.
type Mode string

// The modes.
const (
	// Production has no defaults that reach a service or hold a secret: every address and
	// token must be given, and unsafe settings are refused.
	Production Mode = "production"
	// Dev has loopback defaults that match the dev stack (scripts/services.sh), documented
	// dev tokens, and the simulated providers.
	Dev Mode = "dev"
)

// ModeFrom reads WALLETSAGA_ENV: unset or "production" is Production, "dev" is Dev, and
// anything else is an error (a typo must not fall back to either).
func ModeFrom(getenv func(string) string) (Mode, error) {
	switch v := getenv(ModeEnv); v {
	case "", string(Production):
		return Production, nil
	case string(Dev):
		return Dev, nil
	default:
		return "", fmt.Errorf("%s: must be %q or %q (unset means production), got %q", ModeEnv, Dev, Production, v)
	}
}

// AskedVersion reports whether args ask for the build's version: --version (or -version)
// among the flags, before any "--".
func AskedVersion(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--version", "-version":
			return true
		}
	}
	return false
}

// PrintVersion writes what --version prints: program's build, as buildinfo reads it.
func PrintVersion(w io.Writer, program string) error {
	_, err := fmt.Fprintln(w, buildinfo.Read().String(program))
	return err
}

// FlagName is the command-line spelling of an environment variable's setting:
// DATABASE_URL is --database-url.
func FlagName(env string) string {
	return strings.ReplaceAll(strings.ToLower(env), "_", "-")
}

// Flags binds each setting to a conventional flag (--database-url) with the environment
// variable of the same name (DATABASE_URL) as its fallback, then the built-in default. A
// default may hold only in dev (DevString): in production such a setting must be given.
// Problems met while binding (a value that does not parse, a required setting missing, a
// secret given on the command line, a secret file that cannot be read) are collected, so a
// binary names every one of them in one message.
type Flags struct {
	fs       *flag.FlagSet
	getenv   func(string) string
	mode     Mode
	problems Problems
	// after runs once the command line is parsed: required checks and secret files.
	after []func()
	// only, when not nil, limits the required checks to these settings (a subcommand that
	// needs few of them).
	only map[string]bool
	// required names the settings production needs given, and defaults the defaults applied
	// after parsing rather than held by their flag, for Reference.
	required map[string]bool
	defaults map[string]string
}

// OnlyRequire limits the settings that must be given in production to envs (for a
// subcommand such as migrate, which needs only the database); call it before Parse.
func (f *Flags) OnlyRequire(envs ...string) {
	f.only = map[string]bool{}
	for _, e := range envs {
		f.only[e] = true
	}
}

// requires reports whether env must be given.
func (f *Flags) requires(env string) bool { return f.only == nil || f.only[env] }

// NewFlags returns a flag set for a binary running in mode, reading fallbacks through getenv.
// Its usage message lists commands (name and what it does, in order) before the flags.
func NewFlags(name string, mode Mode, getenv func(string) string, out io.Writer, commands ...[2]string) *Flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	f := &Flags{fs: fs, getenv: getenv, mode: mode, required: map[string]bool{}, defaults: map[string]string{}}
	if c, ok := out.(*capture); ok {
		c.flags = f // Reference asked for the flags a binary binds
	}
	fs.Usage = func() {
		w := fs.Output()
		if len(commands) > 0 {
			fmt.Fprintf(w, "Usage: %s [command] [flags]\n\nCommands:\n", strings.Fields(name)[0])
			for _, c := range commands {
				fmt.Fprintf(w, "  %-12s %s\n", c[0], c[1])
			}
			fmt.Fprintln(w)
		} else {
			fmt.Fprintf(w, "Usage: %s [flags]\n\n", name)
		}
		fmt.Fprintf(w, "Running in %s mode (%s=dev for the dev stack's defaults; unset means production).\n", mode, ModeEnv)
		fmt.Fprintln(w, "Each flag falls back to the environment variable named beside it, then to its default.")
		fmt.Fprintln(w, "\nFlags:")
		fmt.Fprintln(w, "  --version\n    \tprint the build's version, revision and Go version, and exit")
		var secrets []string
		fs.VisitAll(func(fl *flag.Flag) {
			if r, ok := fl.Value.(refusedSecret); ok {
				secrets = append(secrets, fmt.Sprintf("  %s (or %s_FILE / --%s-file)\n    \t%s", r.env, r.env, fl.Name, r.usage))
				return
			}
			typ, usage := flag.UnquoteUsage(fl)
			fmt.Fprintf(w, "  --%s %s\n    \t%s", fl.Name, typ, usage)
			if fl.DefValue != "" && fl.DefValue != "0" && fl.DefValue != "false" && fl.DefValue != "0s" {
				fmt.Fprintf(w, " (default %q)", fl.DefValue)
			}
			fmt.Fprintln(w)
		})
		if len(secrets) > 0 {
			fmt.Fprintln(w, "\nSecrets (from the environment or a file only, never a flag: ps would show them):")
			for _, l := range secrets {
				fmt.Fprintln(w, l)
			}
		}
	}
	return f
}

// Mode is the mode the flags were bound for.
func (f *Flags) Mode() Mode { return f.mode }

// FlagSet exposes the underlying set (Args, Usage).
func (f *Flags) FlagSet() *flag.FlagSet { return f.fs }

// String binds a string setting with the same default in every mode.
func (f *Flags) String(p *string, env, def, usage string) {
	if v := f.getenv(env); v != "" {
		def = v
	}
	f.fs.StringVar(p, FlagName(env), def, usage+" (env "+env+")")
}

// DevString binds a string setting whose default devDef holds only in dev: in production it
// must be given (an address that silently points at loopback, or a credential that anyone
// could read in the README, is worse than a refusal to start).
func (f *Flags) DevString(p *string, env, devDef, usage string) {
	f.DevOptional(p, env, devDef, usage)
	f.required[env] = true
	f.after = append(f.after, func() {
		if *p == "" && f.requires(env) {
			f.problems.Addf(env, "required (set --%s or %s)", FlagName(env), env)
		}
	})
}

// DevOptional binds a string setting whose default devDef holds only in dev; in production
// it may stay empty.
func (f *Flags) DevOptional(p *string, env, devDef, usage string) {
	def := ""
	if f.mode == Dev {
		def = devDef
	}
	f.String(p, env, def, usage+"; default "+describeDevDefault(devDef))
}

func describeDevDefault(v string) string {
	if v == "" {
		return "none"
	}
	return "in dev " + v + ", none in production"
}

// Secret binds a secret: read from the environment variable env, or from the file named by
// env_FILE (--env-file on the command line), never from a flag of its own, where ps would
// show it: --env is refused with a message saying where to put it. devDef, when not empty,
// is the documented dev value used in dev when nothing is set. The value is never shown.
func (f *Flags) Secret(p *string, env, devDef, usage string) {
	*p = f.getenv(env)
	fileEnv := env + "_FILE"
	var file string
	f.fs.Var(refusedSecret{f: f, env: env, usage: usage, devDefault: devDef != ""}, FlagName(env), usage)
	f.String(&file, fileEnv, "", "file holding "+env+": "+usage)
	f.after = append(f.after, func() {
		if file != "" {
			v, err := ReadSecret(fileEnv, "", file)
			if err != nil {
				f.problems = append(f.problems, err.Error())
				return
			}
			*p = v
		}
		if *p == "" && f.mode == Dev {
			*p = devDef
		}
	})
}

// refusedSecret is the flag a secret would have: setting it is a problem, not a value.
type refusedSecret struct {
	f     *Flags
	env   string
	usage string
	// devDefault: dev has a documented value for it (never shown).
	devDefault bool
}

func (r refusedSecret) String() string { return "" }

func (r refusedSecret) Set(string) error {
	r.f.problems.Addf(r.env, "secrets are not accepted on the command line, where any user of the host can read them (ps); set %s or %s_FILE", r.env, r.env)
	return nil
}

// Int binds an int.
func (f *Flags) Int(p *int, env string, def int, usage string) {
	if v := f.getenv(env); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			f.problems.Addf(env, "%q is not an integer", v)
		} else {
			def = n
		}
	}
	f.fs.IntVar(p, FlagName(env), def, usage+" (env "+env+")")
}

// Bool binds a bool.
func (f *Flags) Bool(p *bool, env string, def bool, usage string) {
	if v := f.getenv(env); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			f.problems.Addf(env, "%q is not a boolean", v)
		} else {
			def = b
		}
	}
	f.fs.BoolVar(p, FlagName(env), def, usage+" (env "+env+")")
}

// Duration binds a duration ("500ms", "5s").
func (f *Flags) Duration(p *time.Duration, env string, def time.Duration, usage string) {
	if v := f.getenv(env); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			f.problems.Addf(env, "%q is not a duration", v)
		} else {
			def = d
		}
	}
	f.fs.DurationVar(p, FlagName(env), def, usage+" (env "+env+")")
}

// Parse parses args. It returns flag.ErrHelp for -h (after printing the usage) and an error
// for a command line that does not parse; every other problem is collected in Problems.
func (f *Flags) Parse(args []string) error {
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	for _, fn := range f.after {
		fn()
	}
	return nil
}

// Problems returns the problems met while binding and parsing; a binary adds its own checks
// and reports them all at once with Err.
func (f *Flags) Problems() *Problems { return &f.problems }

// Err returns nil, or one error naming every problem collected, and in production how to
// get the dev stack's defaults instead.
func (f *Flags) Err() error {
	err := f.problems.Err()
	if err != nil && f.mode == Production {
		return fmt.Errorf("%w\n(running in production mode, the default; %s=dev gives the dev stack's defaults)", err, ModeEnv)
	}
	return err
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
	return errors.New("invalid configuration:\n  " + strings.Join(p, "\n  "))
}

// CheckHostPort validates a host:port list (comma-separated when many is true).
func (p *Problems) CheckHostPort(field, v string, many bool) {
	if v == "" {
		return // a required setting that is missing is reported as such
	}
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
// with a request's context carry its request_id (see reqid), and those logged with a
// context carrying a span its trace_id and span_id (see telemetry.LogHandler).
func Logger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("LOG_LEVEL: %q is not debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(reqid.Handler(telemetry.LogHandler(slog.NewJSONHandler(w, opts)))), nil
	case "text", "":
		return slog.New(reqid.Handler(telemetry.LogHandler(slog.NewTextHandler(w, opts)))), nil
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

// CheckOverride validates the override of a safety check: set, its value is the operator's
// reason, stated in words (it is logged at every start), so "1" or "true" is refused.
func (p *Problems) CheckOverride(field, reason string) {
	if reason != "" && len(strings.Fields(reason)) < 2 {
		p.Addf(field, "must state the reason in words (for example %q), got %q", "load-test cluster, data is disposable", reason)
	}
}

// OpenDurablePool opens a service's pool on url with o, then reads the server's durability
// settings and applies RequireDurable to them with override; on any failure the pool is
// closed and the error returned.
func OpenDurablePool(ctx context.Context, mode Mode, log *slog.Logger, url string, o pg.Options, override string) (*pgxpool.Pool, error) {
	pool, err := pg.Open(ctx, url, o)
	if err != nil {
		return nil, err
	}
	d, err := pg.ReadDurability(ctx, pool)
	if err == nil {
		err = RequireDurable(mode, log, Redact(url), d.Unsafe(), override)
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// RequireDurable decides whether a binary may run on a database that reports unsafe (the
// settings under which an acknowledged commit can vanish in a crash, pg.Durability.Unsafe):
// in production it refuses, naming them, unless override states a reason, which is then
// logged as a warning at every start; in dev it only warns.
func RequireDurable(mode Mode, log *slog.Logger, database string, unsafe []string, override string) error {
	if len(unsafe) == 0 {
		return nil
	}
	what := strings.Join(unsafe, "; ")
	switch {
	case mode == Dev:
		log.Warn("the database can lose acknowledged commits in a crash (fine for the dev stack, never for money)", "database", database, "unsafe", what)
		return nil
	case override != "":
		log.Warn("running on a database that can lose acknowledged commits in a crash, as ALLOW_UNSAFE_DURABILITY says", "database", database, "unsafe", what, "reason", override)
		return nil
	}
	return fmt.Errorf("refusing to start: the database %s can lose commits it acknowledged in a crash (%s): a saga could charge a customer and then vanish, or messages be acknowledged that were never kept. Fix the server's settings, or set ALLOW_UNSAFE_DURABILITY to the reason to run anyway", database, what)
}

// CheckServiceURL validates the URL of a remote party (a provider): http or https with a
// host; in production plain http only to a loopback host (a sidecar on the same machine),
// since phone numbers, amounts and tokens travel in it.
func (p *Problems) CheckServiceURL(mode Mode, field, v string) {
	if v == "" {
		return // a required setting that is missing is reported as such
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.Addf(field, "must be an http(s) URL with a host, got %q", redact.URL(v))
		return
	}
	if mode == Production && u.Scheme == "http" && !isLoopback(u.Hostname()) {
		p.Addf(field, "must be https in production (plain http only to a loopback sidecar), got %q", redact.URL(v))
	}
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckLog validates LOG_FORMAT and LOG_LEVEL as Logger takes them.
func (p *Problems) CheckLog(format, level string) {
	if _, err := Logger(io.Discard, format, level); err != nil {
		*p = append(*p, err.Error())
	}
}

// RetentionFlags binds the pruner's pace, which both services share: RETENTION_BATCH (rows
// one statement deletes at most) and RETENTION_PAUSE (the wait between two batches).
func (f *Flags) RetentionFlags(batch *int, pause *time.Duration) {
	f.Int(batch, "RETENTION_BATCH", retention.DefaultBatch, "retention: the most rows one delete statement removes (1–10000); small batches hold few locks for a short time")
	f.Duration(pause, "RETENTION_PAUSE", retention.DefaultPause, "retention: the wait between two delete batches of a table with more to prune (0–1m)")
}

// CheckRetention validates the pruner's pace and each window of windows (setting name →
// window) against its bounds: in production as the bounds say, in dev from DevMin, so that
// a chaos run can prune within seconds.
func (p *Problems) CheckRetention(mode Mode, batch int, pause time.Duration, windows map[string]time.Duration, bounds map[string]retention.Bounds) {
	if batch < 1 || batch > 10000 {
		p.Addf("RETENTION_BATCH", "must be 1–10000, got %d", batch)
	}
	if pause < 0 || pause > time.Minute {
		p.Addf("RETENTION_PAUSE", "must be 0–1m, got %s", pause)
	}
	names := make([]string, 0, len(windows))
	for name := range windows {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if msg := bounds[name].Check(mode == Dev, windows[name]); msg != "" {
			p.Addf(name, "%s", msg)
		}
	}
}
