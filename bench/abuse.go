package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// metricsToken is the METRICS_TOKEN of the abuse part's services: its scrapers send it, as
// a Prometheus would.
const metricsToken = "walletsaga-bench-metrics-token"

// Abuse is the abuse part: deposits at 8 clients alone, then the same beside 100 scrapers of
// both services' /metrics and /readyz, then beside a flood, on services with production's
// admission settings.
type Abuse struct {
	Alone   AbusePhase `json:"alone"`
	Scraped AbusePhase `json:"scraped"`
	Flooded AbusePhase `json:"flooded"`
	// AloneAgain is deposits alone once more, after the flood: the machine's speed drifts
	// within a run, so the loaded phases are compared with the mean of the two alone ones
	// around them (Baseline).
	AloneAgain AbusePhase `json:"alone_again"`
	// Refused is walletsaga_http_refused_total of both services at the end, by reason.
	Refused map[string]float64 `json:"refused"`
}

// AbusePhase is one deposit phase of the abuse part and what ran beside it.
type AbusePhase struct {
	Deposits Phase `json:"deposits"`
	// Backends: the most client backends of the product's database at once, and the most
	// of them not idle, over the phase (sampled every 50 ms).
	MaxBackends int64 `json:"max_backends"`
	MaxActive   int64 `json:"max_active_backends"`
	// Requests: what the abusers sent and got, by "<kind> <status>" ("<kind> hung up" for
	// one the abuser gave up on, "<kind> error" for a transport error).
	Requests map[string]int64 `json:"requests,omitempty"`
	// SlowHeldS is how long the server kept the slow clients' connections (seconds,
	// median and max), which send a header byte a second and never finish.
	SlowHeldS []float64 `json:"slow_client_held_s,omitempty"`
}

// abuser runs beside a deposit phase until ctx ends.
type abuser func(ctx context.Context, count func(kind, outcome string))

func (b *bench) abuse(ctx context.Context) error {
	done := b.step("abuse")
	defer done()
	u, err := b.newDB(ctx, "abuse")
	if err != nil {
		return err
	}
	stmts, err := b.statements(ctx)
	if err != nil {
		return err
	}
	topic, err := b.newTopic(ctx, "abuse", 8)
	if err != nil {
		return err
	}
	wenv, nenv := b.productEnv(u, topic)
	for _, env := range []map[string]string{wenv, nenv} {
		// Production's admission and private metrics; the bench's own deposits use the
		// service token, which RATE_LIMIT does not hold (SERVICE_RATE_LIMIT, unset).
		env["METRICS_TOKEN"], env["RATE_LIMIT"], env["RATE_BURST"] = metricsToken, "100", "200"
	}
	ws, err := b.start(ctx, "walletsvc", "walletsvc", wenv)
	if err != nil {
		return err
	}
	ns, err := b.start(ctx, "notifier", "notifier", nenv)
	if err != nil {
		return err
	}
	defer b.stopProc("notifier")
	defer b.stopProc("walletsvc")
	db, err := newProbePool(ctx, u)
	if err != nil {
		return err
	}
	defer db.Close()
	api := newAPIClient(ws.URL)
	users, err := createUsers(ctx, api, b.cfg.Users, 8, b.tag)
	if err != nil {
		return fmt.Errorf("creating users: %w", err)
	}
	pr := &productRun{tag: "abuse-" + b.ts, wenv: wenv, api: api, db: db, dbURL: u, stmts: stmts, users: users, meter: b.meter, drain: b.cfg.Drain}
	pr.phase(ctx, "deposit", 8, 0, 2*time.Second) // warm-up, not reported
	dbName := u[strings.LastIndex(u, "/")+1:]
	if i := strings.IndexByte(dbName, '?'); i >= 0 {
		dbName = dbName[:i]
	}
	res := &Abuse{}
	res.Alone = b.abusePhase(ctx, pr, dbName)
	services := []string{ws.URL, ns.URL}
	res.Scraped = b.abusePhase(ctx, pr, dbName, scrapers(services, 100))
	res.Flooded = b.abusePhase(ctx, pr, dbName,
		forgedTokens(ws.URL, "/wallet", users, 40), forgedTokens(ns.URL, "/sms", users, 10),
		expensiveReads(ns.URL, 10), scrapers(services, 20), slowClients(ws.URL, 100), slowClients(ns.URL, 100))
	res.AloneAgain = b.abusePhase(ctx, pr, dbName)
	res.Refused = map[string]float64{}
	for _, s := range services {
		if err := addRefused(ctx, s, res.Refused); err != nil {
			return err
		}
	}
	b.res.Abuse = res
	for _, p := range []struct {
		name string
		ph   AbusePhase
	}{{"alone", res.Alone}, {"scraped", res.Scraped}, {"flooded", res.Flooded}, {"alone again", res.AloneAgain}} {
		b.log.Info("abuse", "phase", p.name, "deposits/s", p.ph.Deposits.SagasPerS, "api_p99_ms", p.ph.Deposits.API.P99,
			"failed", p.ph.Deposits.Failed+p.ph.Deposits.Errors+p.ph.Deposits.Timeouts, "max_active_backends", p.ph.MaxActive)
	}
	return nil
}

// abusePhase runs deposits at 8 clients for the phase length with abusers beside them, and
// samples the database's backends meanwhile.
func (b *bench) abusePhase(ctx context.Context, pr *productRun, dbName string, abusers ...abuser) AbusePhase {
	var (
		ph      AbusePhase
		mu      sync.Mutex
		counts  = map[string]int64{}
		maxAll  atomic.Int64
		maxBusy atomic.Int64
	)
	count := func(kind, outcome string) {
		mu.Lock()
		counts[kind+" "+outcome]++
		mu.Unlock()
	}
	actx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			var all, busy int64
			err := b.admin.QueryRow(actx, `SELECT count(*), count(*) FILTER (WHERE state <> 'idle')
				FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'`, dbName).Scan(&all, &busy)
			if err == nil {
				maxAll.Store(max(maxAll.Load(), all))
				maxBusy.Store(max(maxBusy.Load(), busy))
			}
			select {
			case <-actx.Done():
				return
			case <-t.C:
			}
		}
	})
	var held []float64
	for _, a := range abusers {
		wg.Go(func() { a(actx, count) })
	}
	// The abusers run over the deposits' window only, not over the SMS drain after it.
	window := time.AfterFunc(b.cfg.Phase, stop)
	ph.Deposits = pr.phase(ctx, "deposit", 8, 0, b.cfg.Phase)
	window.Stop()
	stop()
	wg.Wait()
	ph.MaxBackends, ph.MaxActive = maxAll.Load(), maxBusy.Load()
	if len(counts) > 0 {
		ph.Requests = counts
	}
	for k, v := range counts {
		if s, ok := strings.CutPrefix(k, "slow held "); ok {
			if secs, err := strconv.ParseFloat(s, 64); err == nil {
				for range v {
					held = append(held, secs)
				}
			}
			delete(counts, k)
		}
	}
	if len(held) > 0 {
		ph.SlowHeldS = []float64{round2(percentile(held, 50)), round2(percentile(held, 100))}
	}
	return ph
}

// percentile returns the p-th percentile of xs (nearest rank), xs sorted in place.
func percentile(xs []float64, p float64) float64 {
	slices.Sort(xs)
	i := int(float64(len(xs))*p/100+0.5) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// abuseClient is an HTTP client from local address from (127.0.0.x: each its own client
// for a rate keyed by address), keeping no connection idle.
func abuseClient(from string) *http.Client {
	d := &net.Dialer{Timeout: time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4}}
}

// hit sends one GET of target with token (if any), giving up after giveUp, and counts the
// outcome under kind.
func hit(ctx context.Context, hc *http.Client, target, token, kind string, giveUp time.Duration, count func(kind, outcome string)) {
	rctx, cancel := context.WithTimeout(ctx, giveUp)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, target, nil)
	if err != nil {
		count(kind, "error")
		return
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	switch {
	case err != nil && rctx.Err() != nil && ctx.Err() == nil:
		count(kind, "hung up")
	case err != nil:
		if ctx.Err() == nil {
			count(kind, "error")
		}
	default:
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		count(kind, strconv.Itoa(resp.StatusCode))
	}
}

// scrapers: n clients scraping the services' /metrics (with the metrics token) and /readyz
// in turn, each hanging up after 200 ms, as the reproduction did.
func scrapers(services []string, n int) abuser {
	return func(ctx context.Context, count func(kind, outcome string)) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				hc := abuseClient("")
				for j := i; ctx.Err() == nil; j++ {
					base := services[j%len(services)]
					if j/len(services)%2 == 0 {
						hit(ctx, hc, base+"/metrics", metricsToken, "scrape /metrics", 200*time.Millisecond, count)
					} else {
						hit(ctx, hc, base+"/readyz", "", "scrape /readyz", 200*time.Millisecond, count)
					}
				}
			})
		}
		wg.Wait()
	}
}

// forgedTokens: n clients, each from an address of its own, asking base for a user's
// /v1/users/{id}<suffix> with a new made-up bearer token each time.
func forgedTokens(base, suffix string, users []int64, n int) abuser {
	return func(ctx context.Context, count func(kind, outcome string)) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				hc := abuseClient("127.0.0." + strconv.Itoa(10+i))
				path := "/v1/users/" + strconv.FormatInt(users[i%len(users)], 10) + suffix
				for ctx.Err() == nil {
					tok := make([]byte, 16)
					_, _ = rand.Read(tok)
					hit(ctx, hc, base+path, hex.EncodeToString(tok), "forged token", 2*time.Second, count)
				}
			})
		}
		wg.Wait()
	}
}

// expensiveReads: n clients of the notifier's read API with the read token, each asking for
// the largest pages of its lists.
func expensiveReads(base string, n int) abuser {
	paths := []string{"/v1/sms?limit=1000", "/v1/users?limit=100", "/v1/activity?limit=1000", "/v1/bad-messages?limit=100", "/v1/gate"}
	return func(ctx context.Context, count func(kind, outcome string)) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				hc := abuseClient("127.0.0." + strconv.Itoa(100+i))
				for j := i; ctx.Err() == nil; j++ {
					hit(ctx, hc, base+paths[j%len(paths)], readToken, "expensive read", 5*time.Second, count)
				}
			})
		}
		wg.Wait()
	}
}

// slowClients: n connections to base that send a request line and then one header byte a
// second, never finishing; each counts how long the server kept it ("slow held <s>").
func slowClients(base string, n int) abuser {
	return func(ctx context.Context, count func(kind, outcome string)) {
		u, err := url.Parse(base)
		if err != nil {
			count("slow", "error")
			return
		}
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.1." + strconv.Itoa(1+i%250))}}
				conn, err := d.DialContext(ctx, "tcp", u.Host)
				if err != nil {
					count("slow", "error")
					return
				}
				defer func() { _ = conn.Close() }() // the abuser's own connection: a failed close loses nothing
				t0 := time.Now()
				closed := make(chan struct{})
				go func() {
					// The server's answer (408 or a close) ends the connection.
					_, _ = io.Copy(io.Discard, bufio.NewReader(conn))
					close(closed)
				}()
				if _, err := fmt.Fprintf(conn, "GET /v1/users/1/wallet HTTP/1.1\r\nHost: %s\r\nX-Slow: ", u.Host); err != nil {
					count("slow", "error")
					return
				}
				tick := time.NewTicker(time.Second)
				defer tick.Stop()
				for {
					select {
					case <-closed:
						count("slow held", strconv.FormatFloat(time.Since(t0).Round(100*time.Millisecond).Seconds(), 'f', 1, 64))
						return
					case <-ctx.Done():
						count("slow", "still open at the end")
						return
					case <-tick.C:
						_, _ = conn.Write([]byte("a"))
					}
				}
			})
		}
		wg.Wait()
	}
}

// addRefused adds base's walletsaga_http_refused_total samples to into, by reason.
func addRefused(ctx context.Context, base string, into map[string]float64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+metricsToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s/metrics: %d", base, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, `walletsaga_http_refused_total{reason="`)
		if !ok {
			continue
		}
		reason, val, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return fmt.Errorf("%s/metrics: %q: %w", base, line, err)
		}
		into[reason] += v
	}
	return sc.Err()
}

// abuseTargets: the bounds on what abuse may do to the deposits beside it. The p99
// bounds compare phases of one run (the machine's speed varies from hour to hour).
func abuseTargets(a *Abuse) []Target {
	if a == nil || a.Alone.Deposits.API.P99 <= 0 {
		return nil
	}
	alone := a.Baseline()
	notDone := func(p Phase) float64 { return float64(p.Failed + p.Errors + p.Timeouts) }
	scraped := round2(a.Scraped.Deposits.API.P99 / alone)
	flooded := round2(a.Flooded.Deposits.API.P99 / alone)
	lost := notDone(a.Scraped.Deposits) + notDone(a.Flooded.Deposits) + float64(a.Scraped.Deposits.Undelivered+a.Flooded.Deposits.Undelivered)
	extra := float64(a.Scraped.MaxActive - max(a.Alone.MaxActive, a.AloneAgain.MaxActive))
	return []Target{
		{What: "abuse: deposit API p99 beside 100 scrapers ÷ alone (8 clients; alone: the mean of before and after)", Want: "≤ 3", Got: scraped, Reached: scraped <= 3},
		{What: "abuse: deposit API p99 beside the flood ÷ alone (8 clients; alone: the mean of before and after)", Want: "≤ 2", Got: flooded, Reached: flooded <= 2},
		{What: "abuse: deposits not completed, or not texted, beside scrapers and the flood", Want: "= 0", Got: lost, Reached: lost == 0},
		{What: "abuse: most busy database backends beside 100 scrapers − alone", Want: "≤ 3", Got: extra, Reached: extra <= 3},
	}
}

// Baseline is the deposits' API p99 alone: the mean of the phase before the scrapers and the
// one after the flood (only the first when the second did not run).
func (a *Abuse) Baseline() float64 {
	if a.AloneAgain.Deposits.API.P99 <= 0 {
		return a.Alone.Deposits.API.P99
	}
	return (a.Alone.Deposits.API.P99 + a.AloneAgain.Deposits.API.P99) / 2
}
