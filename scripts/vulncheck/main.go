// Command vulncheck (make vulncheck) scans the module for known vulnerabilities with
// govulncheck, at the version go.mod pins as a tool, against a Go vulnerability database
// built offline, and fails on any vulnerability the code reaches that exceptions.txt does not
// list with a reason.
//
// The database comes from the module golang.org/x/vulndb at -vulndb, fetched through the Go
// module proxy like any module: it holds every report as an OSV JSON file under data/osv/, and
// its own command cmd/indexdb turns such a folder into the layout govulncheck's -db file://
// reads (index/db.json, index/modules.json, index/vulns.json and ID/<id>.json, each also
// gzipped). The result is kept under .run/vulndb/<version>/ (-cache), so it is built once per
// version; nothing reaches the vulnerability database's own service.
//
// A vulnerability is reachable when govulncheck traces a call from this module's code to one
// of its symbols. Those it only finds in a package the code imports or a module it requires
// are listed, not failed on. An exception the scan no longer reaches fails the run too: left
// in the file it would hide the same vulnerability should it come back.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, errFindings) {
		os.Exit(1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulncheck:", err)
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vulncheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	version := fs.String("vulndb", "", "version of the module golang.org/x/vulndb to build the database from (required; the Makefile's VULNDB_VERSION)")
	cache := fs.String("cache", ".run/vulndb", "directory that keeps one built database per vulndb version")
	exceptionsFile := fs.String("exceptions", "scripts/vulncheck/exceptions.txt", "the vulnerabilities that do not apply, each with its reason")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: vulncheck -vulndb VERSION [flags] [packages (default ./...)]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" {
		fs.Usage()
		return errors.New("-vulndb is required")
	}
	patterns := fs.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	// The go command the Makefile runs (GO), with the toolchain it exports (GOTOOLCHAIN).
	goBin := cmp.Or(os.Getenv("GO"), "go")

	f, err := os.Open(*exceptionsFile)
	if err != nil {
		return err
	}
	exceptions, err := parseExceptions(f)
	f.Close() //nolint:errcheck // read-only: everything was read or parseExceptions failed
	if err != nil {
		return fmt.Errorf("%s: %w", *exceptionsFile, err)
	}

	db, err := ensureDB(ctx, goBin, *cache, *version, stderr)
	if err != nil {
		return err
	}
	dbURL := (&url.URL{Scheme: "file", Path: filepath.ToSlash(db)}).String()

	// With -format json govulncheck exits 0 whatever it finds: the verdict is this
	// program's, from the findings it streams.
	scanArgs := append([]string{"tool", "govulncheck", "-db", dbURL, "-format", "json"}, patterns...)
	cmd := exec.CommandContext(ctx, goBin, scanArgs...) //nolint:gosec // G204: the go command the Makefile names (GO) running the pinned govulncheck
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	res, readErr := readScan(out)
	if readErr != nil {
		_, _ = io.Copy(io.Discard, out)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("govulncheck: %w", err)
	}
	if readErr != nil {
		return fmt.Errorf("reading govulncheck's output: %w", readErr)
	}
	v := decide(res, exceptions)
	v.print(stdout, res, exceptions)
	if !v.ok() {
		return errFindings
	}
	return nil
}

// errFindings says the scan ran and its verdict is a failure (exit status 1; 2 is an error
// of the run itself).
var errFindings = errors.New("vulnerabilities found")
