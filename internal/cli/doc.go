// Package cli holds what the binaries' wiring shares: main and the subcommand (program.go),
// flags whose defaults come from environment variables of the same name (flags.go),
// validation messages that name the field at fault (problems.go), the mode (mode.go), the
// slog logger (logger.go), secrets (secrets.go), the database settings and pool
// (database.go), the address file (addrfile.go), the dev stack's defaults (devstack.go), and
// the settings and parts both services share (service.go, serve.go). Only cmd/ calls it;
// nothing below cmd/ reads the environment.
package cli
