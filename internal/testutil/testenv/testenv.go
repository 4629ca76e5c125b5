// Package testenv decides whether an integration test runs, and what it does when a service
// it needs is missing. Under `go test -short` (make test-unit) every integration test skips,
// so only the unit tests run. Otherwise a missing service fails the test under CI (CI=true)
// or `make test` (WALLETSAGA_REQUIRE_SERVICES=1), and a developer running `go test` without
// the stack gets a skip that says how to start it.
//
// An integration test is one that calls a helper handing it a service (testdb.New,
// rmqtest.Require, or one of its own that calls SkipIfShort first), so a test cannot reach a
// service without passing here.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// DefaultDatabaseURL matches the cluster started by `make services`.
const DefaultDatabaseURL = "postgres://walletsaga:walletsaga@127.0.0.1:55432/walletsaga?sslmode=disable" //nolint:gosec // G101: the dev stack's documented password

// DefaultNamesrv matches the name server started by `make services`.
const DefaultNamesrv = "127.0.0.1:9876"

// Required reports whether missing services must fail tests instead of skipping them.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("WALLETSAGA_REQUIRE_SERVICES") == "1"
}

// SkipIfShort skips an integration test under -short, naming the service it needs. The
// helpers that hand out a service call it first.
func SkipIfShort(t testing.TB, service string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("integration test (needs %s): skipped under -short", service)
	}
}

// Unavailable fails (when services are required) or skips the test, naming the service,
// the address tried and the error.
func Unavailable(t testing.TB, service, addr string, err error) {
	t.Helper()
	if Required() {
		t.Fatalf("%s at %s is required but unreachable: %v (start it with `make services`)", service, addr, err)
	}
	t.Skipf("%s at %s unreachable (%v): run `make services` to start it, or `make test`", service, addr, err)
}

// DatabaseURL returns TEST_DATABASE_URL, DATABASE_URL or the dev stack's default.
func DatabaseURL() string {
	for _, k := range []string{"TEST_DATABASE_URL", "DATABASE_URL"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return DefaultDatabaseURL
}

// Namesrv returns ROCKETMQ_NAMESRV or the dev stack's default.
func Namesrv() string {
	if v := os.Getenv("ROCKETMQ_NAMESRV"); v != "" {
		return v
	}
	return DefaultNamesrv
}

// Chromium returns the path of headless Chromium (make tools installs Debian's), or fails the
// test (CI, make test) or skips it, as for a missing service.
func Chromium(t testing.TB) string {
	t.Helper()
	SkipIfShort(t, "Chromium")
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "chromium not found: install it with `apt-get install -y --no-install-recommends chromium`"
	if Required() {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
