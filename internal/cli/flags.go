// Flags: settings bound to a flag with the environment variable of the same name as fallback.

package cli

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/walletsaga/walletsaga/internal/retention"
)

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
			// A default may be the environment's value: URLs as logs show them (maskURLs).
			typ, usage := flag.UnquoteUsage(fl)
			fmt.Fprintf(w, "  --%s %s\n    \t%s", fl.Name, typ, maskURLs(usage))
			if fl.DefValue != "" && fl.DefValue != "0" && fl.DefValue != "false" && fl.DefValue != "0s" {
				fmt.Fprintf(w, " (default %q)", maskURLs(fl.DefValue))
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

// RetentionFlags binds the pruner's pace, which both services share: RETENTION_BATCH (rows
// one statement deletes at most) and RETENTION_PAUSE (the wait between two batches).
func (f *Flags) RetentionFlags(batch *int, pause *time.Duration) {
	f.Int(batch, "RETENTION_BATCH", retention.DefaultBatch, "retention: the most rows one delete statement removes (1–10000); small batches hold few locks for a short time")
	f.Duration(pause, "RETENTION_PAUSE", retention.DefaultPause, "retention: the wait between two delete batches of a table with more to prune (0–1m)")
}
