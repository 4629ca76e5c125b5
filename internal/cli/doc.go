// Package cli holds what the binaries' wiring shares: flags whose defaults come from
// environment variables of the same name (flags.go), validation messages that name the
// field at fault (problems.go), the mode (mode.go), the slog logger (logger.go), secrets
// (secrets.go), the pool (database.go) and the address file (addrfile.go). Only cmd/ calls
// it; nothing below cmd/ reads the environment.
package cli
