// Package e2e runs the real binaries as processes against the real Postgres and RocketMQ:
// it kills them with SIGKILL, runs two notifiers in one group, and checks what users get.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/harness/audit"
	"github.com/walletsaga/walletsaga/internal/harness/procs"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testutil/rmqtest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
)

var binDir string

// devServiceToken is walletsvc's documented default SERVICE_TOKEN.
const devServiceToken = "walletsaga-dev-service-token"

// e2eReadToken is the READ_TOKEN every notifier here runs with: its read API needs it.
const e2eReadToken = "e2e-read-token-0123456789abcdef"

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Every test here needs the stack and skips under -short (newStack): nothing to build.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "walletsaga-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, name := range []string{"walletsvc", "notifier", "demo", "providersim"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "../cmd/"+name)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building", name, err)
			os.Exit(1)
		}
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir) // a temporary directory: the system's to clean if this fails
	os.Exit(code)
}

// stackQueues is how many queues a stack's topic has.
const stackQueues = 8

// stack is one test's world: its own database, topic and consumer group on the shared servers.
type stack struct {
	t *testing.T
	// provider is the payment gateway and merchant: the providersim process, its charges
	// and orders in the stack's database (schema providersim).
	provider *procs.Proc
	broker   rmqtest.Broker
	pool     *pgxpool.Pool
	// notify is the notifier's database: pool's, unless the stack gave the notifier one of
	// its own (newStackApart).
	notify *pgxpool.Pool
	dbURL  string
	topic  string
	group  string
	env    map[string]string
}

func newStack(t *testing.T) *stack {
	pool, dbURL := testdb.New(t)
	return newStackOn(t, pool, dbURL)
}

// newStackApart is newStack with the wallet and the notifier each on a database of its own,
// empty until each service migrates its own schema there (DATABASE_URL, NOTIFY_DATABASE_URL),
// as when the notifier's tables move to a cluster of their own.
func newStackApart(t *testing.T) *stack {
	pool, dbURL := testdb.NewEmpty(t)
	s := newStackOn(t, pool, dbURL)
	notify, notifyURL := testdb.NewEmpty(t)
	s.notify = notify
	s.env["NOTIFY_DATABASE_URL"] = notifyURL
	return s
}

func newStackOn(t *testing.T, pool *pgxpool.Pool, dbURL string) *stack {
	b := rmqtest.Require(t)
	s := &stack{t: t, broker: b, pool: pool, notify: pool, dbURL: dbURL, topic: rmqtest.Unique("e2e-events"), group: rmqtest.Unique("e2e-notifier")}
	b.CreateTopic(t, s.topic, stackQueues)
	// The notifier publishes its dead letters to its group's DLQ topic, which (like any
	// topic here) must exist first.
	b.CreateTopic(t, ordering.DLQTopic(s.group), 1)
	s.env = map[string]string{
		"WALLETSAGA_ENV": "dev", "DATABASE_URL": dbURL, "ROCKETMQ_NAMESRV": b.Namesrv, "WALLET_EVENTS_TOPIC": s.topic,
		// The admin user: the product's users may use only the real topic and groups.
		"ROCKETMQ_ACCESS_KEY": b.Credentials.AccessKey, "ROCKETMQ_SECRET_KEY": b.Credentials.SecretKey,
		"PRODUCER_GROUP": rmqtest.Unique("e2e-relay"), "CONSUMER_GROUP": s.group,
		// Failing SMS are dead-lettered after 3 quick attempts, and the story's failure
		// switches are on, as in the demo.
		"SMS_MAX_ATTEMPTS": "3", "SMS_RETRY_BASE": "50ms", "SMS_DEAD_LETTER_AFTER": "0s",
		"SMS_FAIL_PHONE_PATTERN": "0000$", "SMS_FAIL_AMOUNT": "404",
		"READ_TOKEN":    e2eReadToken,
		"QUEUE_SUSPEND": "100ms", "LANE_POLL": "100ms", "LOG_LEVEL": "warn", "MIGRATE_ON_START": "true",
	}
	s.provider = procs.StartTest(t, procs.Spec{Name: "providersim", Bin: filepath.Join(binDir, "providersim"),
		Env: map[string]string{"WALLETSAGA_ENV": "dev", "DATABASE_URL": dbURL, "LOG_LEVEL": "warn"}})
	s.env["PAYMENT_GATEWAY_URL"], s.env["MERCHANT_URL"] = s.provider.URL, s.provider.URL
	return s
}

// proc is a binary the stack started (procs.StartTest: killed when the test ends, the end
// of its log shown if the test failed).
type proc struct {
	*procs.Proc
	url string
}

// start runs a binary with the stack's environment plus extra, and waits for /healthz.
func (s *stack) start(name string, extra map[string]string) *proc {
	s.t.Helper()
	env := maps.Clone(s.env)
	maps.Copy(env, extra)
	p := procs.StartTest(s.t, procs.Spec{Name: name, Bin: filepath.Join(binDir, name), Env: env})
	return &proc{Proc: p, url: p.URL}
}

// kill sends SIGKILL: no shutdown, no offset commit, no unlock.
func (p *proc) kill() { p.Kill() }

// stop sends SIGTERM and requires a graceful exit, with status 0, within 45 s.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.Stop(45*time.Second))
}

// api is a small client of walletsvc that retries transport errors with the same
// Idempotency-Key (as a careful client would while walletsvc restarts).
type api struct {
	t    *testing.T
	base func() string
}

func (a api) do(method, path, key string, body any) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.base()+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	// walletsvc runs with its documented dev service token (no SERVICE_TOKEN in the stack's env).
	req.Header.Set("Authorization", "Bearer "+devServiceToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, nil
}

// must retries until walletsvc answers (transport errors and 5xx), then requires want.
func (a api) must(want int, method, path, key string, body any) map[string]any {
	a.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		code, out, err := a.do(method, path, key, body)
		if err == nil && code < 500 {
			if code != want {
				a.t.Errorf("%s %s: status %d, want %d: %v", method, path, code, want, out)
			}
			return out
		}
		if time.Now().After(deadline) {
			a.t.Errorf("%s %s: gave up: %v %d %v", method, path, err, code, out)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (a api) createUser(name, phone string) int64 {
	out := a.must(201, "POST", "/v1/users", "", map[string]any{"name": name, "phone": phone, "locale": "en"})
	id, _ := out["id"].(float64)
	require.Positive(a.t, id, "user id in %v", out)
	return int64(id)
}

func (a api) deposit(user, amount int64, key string) {
	a.must(202, "POST", "/v1/users/"+strconv.FormatInt(user, 10)+"/deposits", key, map[string]any{"amount": amount})
}

func (a api) depositWait(user, amount int64, key string) {
	out := a.must(200, "POST", "/v1/users/"+strconv.FormatInt(user, 10)+"/deposits?wait=true", key, map[string]any{"amount": amount})
	require.Equal(a.t, "completed", out["state"], "deposit %v", out)
}

// dbs are the stack's databases, the wallet's and the notifier's.
func (s *stack) dbs() audit.DBs { return audit.DBs{Wallet: s.pool, Notify: s.notify} }

func (s *stack) count(sql string, args ...any) int {
	var n int
	require.NoError(s.t, s.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// audit runs the shared audit (internal/audit) and requires what every test here requires:
// no saga stuck (needs_attention included), every wallet's balance = sum(ledger) ≥ 0, every
// event published, every SMS stating the balance after its event, no SMS of no event. It
// returns the counts for the test's own assertions (events, SMS, lost, duplicated, out of
// order, dead-lettered: every dead letter is counted, none is taken for lost).
func (s *stack) audit() audit.Result {
	t := s.t
	t.Helper()
	r, err := audit.Check(context.Background(), s.dbs(), audit.Options{})
	require.NoError(t, err)
	require.Zero(t, r.SagasStuck+r.LedgerMismatch+r.Unpublished+r.WrongText+r.Phantom, "audit: %+v", r)
	return r
}

// smsDone reports whether the pipeline is done: no saga running, every event published and
// its SMS finished (sent or dead-lettered).
func (s *stack) smsDone() bool {
	quiet, _, err := audit.Quiet(context.Background(), s.dbs())
	require.NoError(s.t, err)
	return quiet
}

// logProgress logs, every interval, the pipeline's counts and each notifier's gate view, so a
// stall in a failing run can be read from the log.
func (s *stack) logProgress(interval time.Duration, notifiers ...*proc) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			var events, published, sms, pending int
			_ = s.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM wallet_events), (SELECT count(*) FROM wallet_events WHERE published_at IS NOT NULL),
				(SELECT count(*) FROM notify.sms_log), (SELECT count(*) FROM notify.notifications WHERE status = 'pending')`).Scan(&events, &published, &sms, &pending)
			line := fmt.Sprintf("progress: events=%d published=%d sms=%d inbox_pending=%d", events, published, sms, pending)
			for i, n := range notifiers {
				if resp, err := readNotifier(n.url + "/v1/gate"); err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					line += fmt.Sprintf(" n%d=%s", i+1, bytes.TrimSpace(b))
				}
			}
			s.t.Log(line)
		}
	}()
	return func() { close(done); <-finished }
}

// readNotifier GETs url from a notifier's read API, with the read token.
func readNotifier(url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+e2eReadToken)
	return http.DefaultClient.Do(req)
}
