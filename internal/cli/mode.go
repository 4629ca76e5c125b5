// Mode: how a binary runs (WALLETSAGA_ENV), and --version.

package cli

import (
	"fmt"
	"io"

	"github.com/walletsaga/walletsaga/internal/buildinfo"
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
