// The binaries' front: main, the subcommand, and what ends a run before it starts.

package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
)

// Run is a binary's whole program: it returns when ctx is cancelled (SIGINT/SIGTERM) and
// everything it started has stopped.
type Run func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// Main runs run with the process's arguments, environment and output until SIGINT or
// SIGTERM, and exits with status 1, naming program, when it fails.
func Main(program string, run Run) {
	tuneGC(Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, program+":", err)
		os.Exit(1)
	}
}

// GCPercent is the garbage collector's target the binaries run with unless GOGC is set:
// the heap may grow to three times what is live before a collection, not two (Go's 100).
// The services keep little live (tens of MiB), and at 8 clients the collector took 5–8% of
// walletsvc's CPU and more of the notifier's; at 200, `make bench`'s product x 8 phases
// used 4% less walletsvc CPU and 10% less notifier CPU per saga.
const GCPercent = 200

// tuneGC sets the collector's target to GCPercent when GOGC is not set (getenv), so that an
// operator's GOGC (and GOMEMLIMIT, which the runtime reads itself) still decides.
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(GCPercent)
	}
}

// Command reads the front of program's command line. --version prints the build's version
// to stdout and returns sub "". Otherwise the first argument, unless it is a flag, names the
// subcommand, one of commands (the first is the default), and rest is what follows it.
func Command(stdout io.Writer, program string, args []string, commands [][2]string) (sub string, rest []string, err error) {
	if AskedVersion(args) {
		return "", nil, PrintVersion(stdout, program)
	}
	sub = commands[0][0]
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	names := make([]string, len(commands))
	for i, c := range commands {
		if c[0] == sub {
			return sub, args, nil
		}
		names[i] = c[0]
	}
	return "", nil, fmt.Errorf("unknown command %q (%s; -h lists them)", sub, strings.Join(names, ", "))
}

// Stop is what run returns when reading its configuration gave err or left arguments rest
// that the subcommand does not take: nil for -h (the usage is printed; asking for it is not
// a failure), else the error.
func Stop(err error, rest []string) error {
	switch {
	case errors.Is(err, flag.ErrHelp):
		return nil
	case err != nil:
		return err
	case len(rest) > 0:
		return fmt.Errorf("unexpected arguments %q", rest)
	}
	return nil
}
