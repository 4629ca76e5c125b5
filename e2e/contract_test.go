package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/testutil/testenv"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// TestOpenAPIContractHoldsUnderSchemathesis runs schemathesis, a property-based API tester
// nobody here wrote, against both binaries on a stack of their own, each from the
// /openapi.yaml it serves: every check, every phase (the documents' examples, the coverage
// of each constraint's edges, fuzzing, and the stateful phase that follows the documents'
// links from a created user to its wallet, events, operations and sagas), authenticated
// per operation with the token its security scheme names. Any failure or error fails the
// test: a status, header or body the document does not state, a request the document
// allows that the server refuses (or the other way round), an undeclared method answered
// otherwise than 405 with Allow, an operation whose authentication is not enforced.
func TestOpenAPIContractHoldsUnderSchemathesis(t *testing.T) {
	t.Parallel()
	cli := schemathesisCLI(t)
	s := newStack(t)
	w := s.start("walletsvc", operatorEnv(e2eWalletOperatorToken))
	a := api{t: t, base: func() string { return w.url }}
	// Data for the notifier's lists before its run: a user with SMS, one of them dead-lettered
	// by the stack's failure switch (4.04). Then the notifier runs without switches, so that
	// an operator's replay of that dead letter goes through: a replay the provider fails is a
	// documented 503, which schemathesis would count as a server error.
	user := a.createUser("Contract User", okPhone(1))
	a.depositWait(user, 10000, "")
	a.depositWait(user, 404, "")
	seeder := s.start("notifier", operatorEnv(e2eNotifierOperatorToken))
	wait.Until(t, 60*time.Second, "the seeded SMS", s.smsDone)
	seeder.stop(t)
	n := s.start("notifier", map[string]string{"OPERATOR_TOKENS": httpx.OperatorEntry(e2eOperator, e2eNotifierOperatorToken), "SMS_FAIL_PHONE_PATTERN": "off", "SMS_FAIL_AMOUNT": "0"})

	dir := t.TempDir()
	walletCfg := writeSchemathesisConfig(t, dir, "walletsvc", walletsvcUnprocessable, map[string]string{"serviceToken": devServiceToken, "operatorToken": e2eWalletOperatorToken})
	notifierCfg := writeSchemathesisConfig(t, dir, "notifier", notifierUnprocessable, map[string]string{"readToken": e2eReadToken, "operatorToken": e2eNotifierOperatorToken})
	// Both at once, each with one worker: schemathesis spends most of its time in Python,
	// whose threads share one core (and Python 3.11's parser is not safe to call from two of
	// them: schemathesis then fails with "AST constructor recursion depth mismatch"), and the
	// machine has two cores.
	var wg sync.WaitGroup
	results := make([]schemathesisResult, 2)
	wg.Go(func() { results[0] = runSchemathesis(cli, walletCfg, w.url, "walletsvc") })
	wg.Go(func() { results[1] = runSchemathesis(cli, notifierCfg, n.url, "notifier") })
	wg.Wait()
	for _, r := range results {
		if r.err != nil {
			t.Errorf("schemathesis against %s found something (%v, %s):\n%s", r.name, r.err, r.took, tail(r.output, 60000))
			continue
		}
		t.Logf("schemathesis against %s: clean in %s\n%s", r.name, r.took, r.summary)
	}
}

// schemathesisResult is what one run of schemathesis said.
type schemathesisResult struct {
	name, output, summary string
	took                  time.Duration
	err                   error
}

// schemathesisCLI returns the path of the schemathesis that scripts/schemathesis.sh
// installs (make tools, make test). Missing, it fails the test under make test and CI
// (WALLETSAGA_REQUIRE_SERVICES=1) and skips it otherwise.
func schemathesisCLI(t *testing.T) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command("bash", "../scripts/schemathesis.sh", "--path")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := fmt.Sprintf("schemathesis is missing (%v): %s", err, strings.TrimSpace(stderr.String()))
		if testenv.Required() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return strings.TrimSpace(string(out))
}

// writeSchemathesisConfig writes the run's schemathesis.toml for one service: the settings of
// both runs, the service's own (its operations' tuning), and the bearer token of each
// security scheme its document declares.
func writeSchemathesisConfig(t *testing.T, dir, name, own string, tokens map[string]string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(schemathesisSettings)
	b.WriteString(own)
	for scheme, token := range tokens {
		fmt.Fprintf(&b, "\n[auth.openapi.%s]\nbearer = %q\n", scheme, token)
	}
	path := filepath.Join(dir, name+".toml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	return path
}

// schemathesisSettings are the settings of both runs.
//
// Examples per operation are fewer than schemathesis' default of 100, to keep both runs
// within about two minutes on two cores beside the other tests: the coverage phase already
// sends each constraint's edge values and each undeclared method, deterministically; the
// fuzzing and stateful phases add random ones on top.
//
// positive_data_acceptance: a request the document allows must not be refused for its shape.
// It accepts 401, 403, 404 and 409 (state, not shape: credentials, a resource that does not
// exist, a conflict with a concurrent request); fewer than schemathesis' defaults, which
// also let 3xx, 429 and 5xx pass. 422 is not among them: it passes only on the operations
// that document it, for the reasons they document (walletsvcUnprocessable,
// notifierUnprocessable), so a 422 anywhere else is still a failure, and so is a 400.
const schemathesisSettings = `
[cache]
enabled = false

[generation]
max-examples = 15

[checks.positive_data_acceptance]
expected-statuses = ["2xx", "401", "403", "404", "409"]
`

// walletsvcUnprocessable lets positive_data_acceptance take 422 on the operations that start
// a saga (deposit, purchase, withdraw, transfer), and nowhere else, because there it is the documented answer to a well-formed
// request that the wallet's state refuses, which no schema can state. Above all: schemathesis
// draws Idempotency-Key values from a small pool ("0", "!", …) and sends them again with other
// bodies, and a key reused by the same user with another request is 422, as the IETF httpapi
// Idempotency-Key draft says and the document's IdempotencyKey parameter and
// OperationRefused response say (replaying the first saga would answer a request that was
// never made; 409 is kept for a key a concurrent request still holds). The same operations
// also answer 422 to a credit beyond the largest balance (balance_overflow), a transfer to
// oneself and wallets in different currencies. Every other check runs on them unchanged.
const walletsvcUnprocessable = `
[[operations]]
include-operation-id = ["deposit", "purchase", "withdraw", "transfer"]
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "422"]
`

// notifierUnprocessable does the same for the notifier's one operation that documents 422:
// an operator's replay of a dead letter the SMS provider refuses for good, or whose stored
// event cannot be rendered.
const notifierUnprocessable = `
[[operations]]
include-operation-id = ["replay"]
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "422"]
`

// summaryLine matches the lines of schemathesis' summary that tell the counts.
var summaryLine = regexp.MustCompile(`(?m)^.*(\(in [0-9.]+s\)|\b(passed|failed|errors?|skipped|warnings?|Tested)\b).*$`)

// runSchemathesis runs every check of schemathesis against the binary at base, from the
// document it serves; anything but a clean exit is an error.
func runSchemathesis(cli, config, base, name string) schemathesisResult {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	report := filepath.Join(filepath.Dir(config), name+"-report")
	cmd := exec.CommandContext(ctx, cli, "--config-file", config, "--no-color", "run",
		"--checks", "all", "--phases", "examples,coverage,fuzzing,stateful",
		"--workers", "1", "--seed", "20260301", "--request-timeout", "40",
		"--report", "junit", "--report-dir", report,
		"--url", base, base+"/openapi.yaml")
	cmd.WaitDelay = 10 * time.Second
	// Its cache and reports stay in the test's temporary directory, not in the checkout.
	cmd.Dir = filepath.Dir(config)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	return schemathesisResult{
		name: name, output: out.String(), summary: strings.Join(summaryLine.FindAllString(out.String(), -1), "\n"),
		took: time.Since(start).Round(time.Second), err: err,
	}
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
