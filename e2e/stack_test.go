// Package e2e runs the real binaries as processes against the real Postgres and RocketMQ:
// it kills them with SIGKILL, runs two notifiers in one group, and checks what users get.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/e2etest"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/rmqtest"
	"github.com/walletsaga/walletsaga/internal/testdb"
)

var binDir string

// devServiceToken is walletsvc's documented default SERVICE_TOKEN.
const devServiceToken = "walletsaga-dev-service-token"

// e2eReadToken is the READ_TOKEN every notifier here runs with: its read API needs it.
const e2eReadToken = "e2e-read-token-0123456789abcdef"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "walletsaga-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, name := range []string{"walletsvc", "notifier", "demo"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "../cmd/"+name)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building", name, err)
			os.Exit(1)
		}
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// stack is one test's world: its own database, topic and consumer group on the shared servers.
type stack struct {
	t      *testing.T
	broker rmqtest.Broker
	pool   *pgxpool.Pool
	dbURL  string
	topic  string
	group  string
	env    map[string]string
}

func newStack(t *testing.T) *stack {
	b := rmqtest.Require(t)
	pool, dbURL := testdb.New(t)
	s := &stack{t: t, broker: b, pool: pool, dbURL: dbURL, topic: rmqtest.Unique("e2e-events"), group: rmqtest.Unique("e2e-notifier")}
	b.CreateTopic(t, s.topic, 8)
	// The notifier publishes its dead letters to its group's DLQ topic, which (like any
	// topic here) must exist first.
	b.CreateTopic(t, ordering.DLQTopic(s.group), 1)
	s.env = map[string]string{
		"DATABASE_URL": dbURL, "ROCKETMQ_NAMESRV": b.Namesrv, "WALLET_EVENTS_TOPIC": s.topic,
		"PRODUCER_GROUP": rmqtest.Unique("e2e-relay"), "CONSUMER_GROUP": s.group,
		// Failing SMS are dead-lettered after 3 quick attempts, and the story's failure
		// switches are on, as in the demo.
		"SMS_MAX_ATTEMPTS": "3", "SMS_RETRY_BASE": "50ms", "SMS_DEAD_LETTER_AFTER": "0s",
		"SMS_FAIL_PHONE_PATTERN": "0000$", "SMS_FAIL_AMOUNT": "404",
		"READ_TOKEN":    e2eReadToken,
		"QUEUE_SUSPEND": "100ms", "LANE_POLL": "100ms", "LOG_LEVEL": "warn", "MIGRATE_ON_START": "true",
	}
	return s
}

// proc is a running binary.
type proc struct {
	name string
	cmd  *exec.Cmd
	url  string
	out  *lockedBuffer
	done chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start runs a binary with the stack's environment plus extra, and waits for /healthz.
func (s *stack) start(name string, extra map[string]string) *proc {
	t := s.t
	addr := e2etest.FreeAddr(t)
	cmd := exec.Command(filepath.Join(binDir, name))
	env := os.Environ()
	for k, v := range s.env {
		env = append(env, k+"="+v)
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	env = append(env, "HTTP_ADDR="+addr)
	cmd.Env = env
	p := &proc{name: name, cmd: cmd, url: "http://" + addr, out: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			out := p.out.String()
			if len(out) > 6000 {
				out = "…" + out[len(out)-6000:]
			}
			t.Logf("%s output (tail):\n%s", name, out)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.done:
			t.Fatalf("%s exited during start-up:\n%s", name, p.out.String())
		default:
		}
		if resp, err := http.Get(p.url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no /healthz within 60s:\n%s", name, p.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill sends SIGKILL: no shutdown, no offset commit, no unlock.
func (p *proc) kill() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// stop sends SIGTERM and waits for a graceful exit.
func (p *proc) stop(t *testing.T) {
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
	case <-time.After(45 * time.Second):
		t.Fatalf("%s did not stop on SIGTERM within 45s:\n%s", p.name, p.out.String())
	}
	require.Equal(t, 0, p.cmd.ProcessState.ExitCode(), "%s exit code; output:\n%s", p.name, p.out.String())
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

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start)
}

func (s *stack) count(sql string, args ...any) int {
	var n int
	require.NoError(s.t, s.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// audit checks the invariants that span both services, user by user:
//   - every saga is terminal and every wallet's balance equals the sum of its ledger, ≥ 0;
//   - every event is published;
//   - the SMS log holds, for each event in seq order, exactly one SMS (dead letters excepted,
//     which must be recorded as such), and its text states the event's balance after.
//
// It returns the counts: events, SMS, lost, duplicated, out of order, dead-lettered.
type auditResult struct{ events, sms, lost, dup, ooo, dead int }

func (s *stack) audit() auditResult {
	t := s.t
	ctx := context.Background()
	require.Zero(t, s.count(`SELECT count(*) FROM sagas WHERE state NOT IN ('completed','compensated','failed','needs_attention')`), "sagas still running")
	require.Zero(t, s.count(`SELECT count(*) FROM wallets w WHERE w.balance < 0 OR w.balance <> COALESCE((SELECT sum(amount) FROM ledger_entries l WHERE l.user_id = w.user_id), 0)`), "ledger mismatch")
	require.Zero(t, s.count(`SELECT count(*) FROM wallet_events WHERE published_at IS NULL`), "unpublished events")
	var r auditResult
	rows, err := s.pool.Query(ctx, `SELECT e.user_id, e.seq, e.balance_after,
		COALESCE(n.status, ''), (SELECT count(*) FROM notify.sms_log l WHERE l.user_id = e.user_id AND l.seq = e.seq AND NOT l.late)
		FROM wallet_events e LEFT JOIN notify.notifications n ON n.user_id = e.user_id AND n.seq = e.seq ORDER BY e.user_id, e.seq`)
	require.NoError(t, err)
	type ev struct {
		user, seq, bal int64
		status         string
		sms            int
	}
	evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ev, error) {
		var e ev
		return e, row.Scan(&e.user, &e.seq, &e.bal, &e.status, &e.sms)
	})
	require.NoError(t, err)
	r.events = len(evs)
	for _, e := range evs {
		switch {
		case e.status == "dead_lettered" && e.sms == 0:
			r.dead++
		case e.sms == 1 && e.status == "sent":
			r.sms++
		case e.sms == 0:
			r.lost++
		default:
			r.dup += e.sms - 1
			r.sms++
		}
	}
	// Order: for each user, SMS rows were written in seq order (ids increase with seq).
	r.ooo = s.count(`SELECT count(*) FROM notify.sms_log a JOIN notify.sms_log b
		ON a.user_id = b.user_id AND a.seq < b.seq AND a.id > b.id WHERE NOT a.late AND NOT b.late`)
	// Texts state the event's balance after it.
	bad := s.count(`SELECT count(*) FROM notify.sms_log l JOIN wallet_events e ON e.user_id = l.user_id AND e.seq = l.seq
		WHERE NOT l.late AND position(to_char(e.balance_after / 100.0, 'FM999999999990.00') || ' ' || e.currency IN l.text) = 0`)
	require.Zero(t, bad, "SMS whose text does not state the balance after its event")
	return r
}

// smsDone reports whether every event has a finished notification.
func (s *stack) smsDone() bool {
	return s.count(`SELECT count(*) FROM wallet_events e LEFT JOIN notify.notifications n
		ON n.user_id = e.user_id AND n.seq = e.seq AND n.status IN ('sent','dead_lettered')
		WHERE n.user_id IS NULL`) == 0
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
