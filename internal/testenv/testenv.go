// Package testenv decides what an integration test does when a service it needs is missing:
// under CI (CI=true) or `make test` (WALLETSAGA_REQUIRE_SERVICES=1) it fails; a developer
// running `go test` without the stack gets a skip that says how to start it.
package testenv

import (
	"os"
	"testing"
)

// DefaultDatabaseURL matches the cluster started by `make services`.
const DefaultDatabaseURL = "postgres://walletsaga:walletsaga@127.0.0.1:55432/walletsaga?sslmode=disable"

// DefaultNamesrv matches the name server started by `make services`.
const DefaultNamesrv = "127.0.0.1:9876"

// Required reports whether missing services must fail tests instead of skipping them.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("WALLETSAGA_REQUIRE_SERVICES") == "1"
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
