package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/testutil/smsprovider"
)

// NotifyDrain is the notifier's own ceiling: it drains the raw broker run's backlog (same
// topic, same messages) into a fresh database with the log sender.
type NotifyDrain struct {
	Backlog     int64     `json:"backlog"`
	SMS         int64     `json:"sms"`
	Seconds     float64   `json:"seconds"`
	SMSPerS     float64   `json:"sms_per_s"`
	StartupSecs float64   `json:"startup_s"`
	CPU         CPUSample `json:"cpu_s"`
	DBCommits   int64     `json:"db_commits"`
	PeakRSSMiB  float64   `json:"peak_rss_mib"`
}

// measureDrain waits for the first SMS row in db, then for window (or the whole backlog),
// and returns the SMS rate between the first and the last row.
func measureDrain(ctx context.Context, db *pgxpool.Pool, t0 time.Time, backlog int64, window time.Duration) (NotifyDrain, error) {
	r := NotifyDrain{Backlog: backlog}
	count := func() int64 {
		var n int64
		_ = db.QueryRow(ctx, `SELECT count(*) FROM notify.sms_log`).Scan(&n)
		return n
	}
	for count() == 0 {
		if time.Since(t0) > 60*time.Second || ctx.Err() != nil {
			return r, fmt.Errorf("no SMS within 60s of the notifier's start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.StartupSecs = round2(time.Since(t0).Seconds())
	end := time.Now().Add(window)
	for time.Now().Before(end) && count() < backlog && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	var secs float64
	if err := db.QueryRow(ctx, `SELECT count(*), COALESCE(extract(epoch FROM max(sent_at) - min(sent_at)), 0) FROM notify.sms_log`).Scan(&r.SMS, &secs); err != nil {
		return r, err
	}
	r.Seconds = round2(secs)
	if secs > 0 {
		r.SMSPerS = round2(float64(r.SMS-1) / secs)
	}
	return r, nil
}

// SlowProvider is the run whose SMS provider takes Delay per SMS.
type SlowProvider struct {
	Users      int     `json:"users"`
	Queues     int     `json:"queues"`
	Workers    int     `json:"workers"`
	DelayMS    int     `json:"delay_ms"`
	Backlog    int64   `json:"backlog"`
	WindowSecs float64 `json:"window_s"`
	Hits       int64   `json:"provider_calls"`
	SMSPerS    float64 `json:"sms_per_s"`
	// QueueCeiling is what one SMS in flight per queue allows (queues × 1/delay): the old
	// design's limit, which the lanes are to beat 4×. LaneCeiling is the lanes' own
	// (workers × 1/delay).
	QueueCeiling float64 `json:"queue_ceiling_per_s"`
	LaneCeiling  float64 `json:"lane_ceiling_per_s"`
	OutOfOrder   int64   `json:"out_of_order"`
	Duplicates   int64   `json:"duplicates"`
}

// startProvider starts the SMS provider the notifier's webhook sender calls (the tests' own,
// with the contract the README states): it answers after delay, delivers each
// Idempotency-Key once (409 to a key it delivered), and fails failPhone's SMS for good (503)
// when set.
func startProvider(delay time.Duration, failPhone string) *smsprovider.Provider {
	p := smsprovider.Start()
	p.SetDelay(delay)
	if failPhone != "" {
		p.SetFault(func(c smsprovider.Call) smsprovider.Fault {
			if c.Phone == failPhone {
				return smsprovider.Fault{Status: http.StatusServiceUnavailable}
			}
			return smsprovider.Fault{}
		})
	}
	return p
}

// LaneBench is what the delivery lanes showed under a failing user, a provider outage and a
// large backlog.
type LaneBench struct {
	Isolation *Isolation `json:"failing_user,omitempty"`
	Outage    *Outage    `json:"provider_outage,omitempty"`
	Backlog   *Backlog   `json:"backlog,omitempty"`
}

// Isolation is the run with one user whose SMS always fail among users transacting at an
// open-loop rate: what the others' SMS took.
type Isolation struct {
	Users          int     `json:"users"`
	RatePerS       float64 `json:"rate_per_s"`
	Seconds        float64 `json:"seconds"`
	PoisonEveryMS  int     `json:"poisoned_user_every_ms"`
	RequestErrors  int64   `json:"request_errors"` // the others' deposits refused or unanswered
	PoisonedEvents int64   `json:"poisoned_events"`
	PoisonedCalls  int64   `json:"poisoned_provider_calls"`
	Events         int64   `json:"others_events"`
	Undelivered    int64   `json:"others_undelivered"`
	E2E            Latency `json:"others_commit_to_sms"`
	// The two halves of E2E: walletsvc's relay (commit → published) and the notifier
	// (published → the provider's acceptance).
	ToPublished    Latency `json:"others_commit_to_published"`
	PublishedToSMS Latency `json:"others_published_to_sms"`
	BreakerOpened  int64   `json:"breaker_opened"`
}

// Outage is the run whose provider answers 503 to everyone for a while during load.
type Outage struct {
	Users      int     `json:"users"`
	RatePerS   float64 `json:"rate_per_s"`
	LoadSecs   float64 `json:"load_s"`
	OutageSecs float64 `json:"outage_s"`
	// RequestErrors are the load's deposits that were refused or unanswered.
	RequestErrors int64 `json:"request_errors"`
	Events        int64 `json:"events"`
	Delivered     int64 `json:"delivered"`
	DeadLettered  int64 `json:"dead_lettered"`
	OutOfOrder    int64 `json:"out_of_order"`
	Duplicates    int64 `json:"duplicates_refused"`
	// RecoverySecs: from the provider's recovery to the last SMS of an event committed before it.
	RecoverySecs  float64 `json:"recovery_s"`
	BreakerOpened int64   `json:"breaker_opened"`
}

// Backlog is a notifier draining a large backlog with the log sender.
type Backlog struct {
	Messages   int64   `json:"messages"`
	Users      int     `json:"users"`
	SMS        int64   `json:"sms"`
	Seconds    float64 `json:"seconds"`
	SMSPerS    float64 `json:"sms_per_s"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
}

// laneStack is walletsvc plus a notifier whose webhook goes to prov, on a database and topic
// of their own, with users created.
type laneStack struct {
	api      apiClient
	db       *pgxpool.Pool
	users    []int64
	notifier *proc
}

func (b *bench) startLaneStack(ctx context.Context, name string, prov *smsprovider.Provider, users int) (*laneStack, error) {
	u, err := b.newDB(ctx, name)
	if err != nil {
		return nil, err
	}
	topic, err := b.newTopic(ctx, name, 8)
	if err != nil {
		return nil, err
	}
	wenv, nenv := b.productEnv(u, topic)
	nenv["SMS_SENDER"], nenv["SMS_WEBHOOK_URL"] = "webhook", prov.URL()
	ws, err := b.start(ctx, name+"-walletsvc", "walletsvc", wenv)
	if err != nil {
		return nil, err
	}
	ns, err := b.start(ctx, name+"-notifier", "notifier", nenv)
	if err != nil {
		return nil, err
	}
	db, err := pgxpool.New(ctx, u)
	if err != nil {
		return nil, err
	}
	s := &laneStack{api: newAPIClient(ws.URL), db: db, notifier: ns}
	if s.users, err = createUsers(ctx, s.api, users, 16, b.tag+int64(len(name))); err != nil {
		db.Close()
		return nil, fmt.Errorf("creating users: %w", err)
	}
	return s, nil
}

func (b *bench) stopLaneStack(name string, s *laneStack) {
	if s != nil {
		s.db.Close()
	}
	b.stopProc(name + "-walletsvc")
	b.stopProc(name + "-notifier")
}

// deposit asks for one deposit without waiting for its saga.
func (s *laneStack) deposit(ctx context.Context, user int64, key string) error {
	_, err := s.api.post(ctx, "/v1/users/"+strconv.FormatInt(user, 10)+"/deposits", key, map[string]any{"amount": 100}, nil)
	return err
}

// openLoop calls f every 1/ratePerS for d, at most 512 at a time; it returns the errors.
func openLoop(ctx context.Context, ratePerS float64, d time.Duration, f func(i int64) error) int64 {
	var (
		errs atomic.Int64
		wg   sync.WaitGroup
	)
	sem := make(chan struct{}, 512)
	interval := time.Duration(float64(time.Second) / ratePerS)
	start := time.Now()
	var i int64
	for at := start; at.Before(start.Add(d)) && ctx.Err() == nil; at = at.Add(interval) {
		time.Sleep(time.Until(at))
		sem <- struct{}{}
		n := i
		i++
		wg.Go(func() {
			defer func() { <-sem }()
			if f(n) != nil {
				errs.Add(1)
			}
		})
	}
	wg.Wait()
	return errs.Load()
}

// breakerOpened reads how often the notifier's provider breaker opened (GET /v1/gate).
func breakerOpened(ctx context.Context, n *proc) int64 {
	var g struct {
		Breaker struct {
			Opened int64 `json:"opened"`
		} `json:"breaker"`
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL+"/v1/gate", nil)
	if err != nil {
		return -1
	}
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	if json.NewDecoder(resp.Body).Decode(&g) != nil {
		return -1
	}
	return g.Breaker.Opened
}

type eventTime struct {
	user, seq int64
	at        time.Time  // committed (occurred_at)
	published *time.Time // published_at
}

// eventsOf returns the events committed in [from, to), with their commit and publish times.
func eventsOf(ctx context.Context, db *pgxpool.Pool, from, to time.Time) ([]eventTime, error) {
	rows, err := db.Query(ctx, `SELECT user_id, seq, occurred_at, published_at FROM wallet_events WHERE occurred_at >= $1 AND occurred_at < $2`, from, to)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (eventTime, error) {
		var e eventTime
		return e, r.Scan(&e.user, &e.seq, &e.at, &e.published)
	})
}

// laneRate is the open-loop rate of the lane runs: half the best deposit rate the product
// phases reached (half load), else the configured fallback.
func (b *bench) laneRate() float64 {
	best := 0.0
	for _, ph := range b.res.Phases {
		if ph.Kind == "deposit" {
			best = max(best, ph.SagasPerS)
		}
	}
	if best > 0 {
		return round2(best / 2)
	}
	return b.cfg.LaneRate
}

// isolation: one user whose SMS always fail (503 for its phone) transacts every 300 ms among
// users transacting at half load; the others' commit→SMS latency is what counts.
func (b *bench) isolation(ctx context.Context) error {
	done := b.step("a user whose SMS always fail")
	defer done()
	const poisonedPhone = "+8613999990001"
	prov := startProvider(0, poisonedPhone)
	defer prov.Close()
	s, err := b.startLaneStack(ctx, "isolation", prov, b.cfg.LaneUsers)
	defer b.stopLaneStack("isolation", s)
	if err != nil {
		return err
	}
	var out struct {
		ID int64 `json:"id"`
	}
	if _, err := s.api.post(ctx, "/v1/users", "", map[string]any{"name": "poisoned", "phone": poisonedPhone, "locale": "en"}, &out); err != nil {
		return err
	}
	poisoned := out.ID
	r := Isolation{Users: len(s.users), RatePerS: b.laneRate(), Seconds: b.cfg.Phase.Seconds(), PoisonEveryMS: 300}
	pctx, stopPoison := context.WithCancel(ctx)
	poisonDone := make(chan int64, 1)
	go func() {
		var n int64
		t := time.NewTicker(300 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-pctx.Done():
				poisonDone <- n
				return
			case <-t.C:
				if s.deposit(ctx, poisoned, fmt.Sprintf("poison-%d-%d", b.tag, n)) == nil {
					n++
				}
			}
		}
	}()
	from := time.Now()
	r.RequestErrors = openLoop(ctx, r.RatePerS, b.cfg.Phase, func(i int64) error {
		return s.deposit(ctx, s.users[i%int64(len(s.users))], fmt.Sprintf("iso-%d-%d", b.tag, i))
	})
	stopPoison()
	r.PoisonedEvents = <-poisonDone
	to := time.Now()
	evs, err := b.waitAccepted(ctx, s.db, prov, from, to, poisoned)
	if err != nil {
		return err
	}
	var lat, pub, dlv []time.Duration
	for _, e := range evs {
		r.Events++
		at := prov.DeliveredAt(e.user, e.seq)
		if at.IsZero() {
			r.Undelivered++
			continue
		}
		lat = append(lat, at.Sub(e.at))
		if e.published != nil {
			pub, dlv = append(pub, e.published.Sub(e.at)), append(dlv, at.Sub(*e.published))
		}
	}
	r.E2E, r.ToPublished, r.PublishedToSMS = latencyOf(lat), latencyOf(pub), latencyOf(dlv)
	r.PoisonedCalls = int64(len(prov.Calls(func(c smsprovider.Call) bool { return c.UserID == poisoned })))
	r.BreakerOpened = breakerOpened(ctx, s.notifier)
	b.lanes().Isolation = &r
	b.log.Info("failing user", "others_p99_ms", r.E2E.P99, "events", r.Events, "undelivered", r.Undelivered, "poisoned_calls", r.PoisonedCalls)
	return nil
}

// waitAccepted waits (up to the drain time) until the provider accepted every event
// committed in [from, to) of users other than except, and returns those events.
func (b *bench) waitAccepted(ctx context.Context, db *pgxpool.Pool, prov *smsprovider.Provider, from, to time.Time, except int64) ([]eventTime, error) {
	deadline := time.Now().Add(b.cfg.Drain)
	for {
		all, err := eventsOf(ctx, db, from, to)
		if err != nil {
			return nil, err
		}
		evs := all[:0]
		missing := 0
		for _, e := range all {
			if e.user == except {
				continue
			}
			evs = append(evs, e)
			if prov.DeliveredAt(e.user, e.seq).IsZero() {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return evs, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// outage: the provider answers 503 to everyone for OutageSecs in the middle of LoadSecs of
// deposits at half load.
func (b *bench) outage(ctx context.Context) error {
	done := b.step("SMS provider outage")
	defer done()
	prov := startProvider(0, "")
	defer prov.Close()
	s, err := b.startLaneStack(ctx, "outage", prov, b.cfg.LaneUsers)
	defer b.stopLaneStack("outage", s)
	if err != nil {
		return err
	}
	load := b.cfg.Outage + 10*time.Second
	r := Outage{Users: len(s.users), RatePerS: b.laneRate(), LoadSecs: load.Seconds(), OutageSecs: b.cfg.Outage.Seconds()}
	var recovered time.Time
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
		prov.SetOutage(true)
		select {
		case <-ctx.Done():
		case <-time.After(b.cfg.Outage):
		}
		prov.SetOutage(false)
	}()
	from := time.Now()
	r.RequestErrors = openLoop(ctx, r.RatePerS, load, func(i int64) error {
		return s.deposit(ctx, s.users[i%int64(len(s.users))], fmt.Sprintf("outage-%d-%d", b.tag, i))
	})
	recovered = from.Add(5*time.Second + b.cfg.Outage)
	evs, err := b.waitAccepted(ctx, s.db, prov, from, time.Now(), 0)
	if err != nil {
		return err
	}
	var last time.Time
	for _, e := range evs {
		r.Events++
		at := prov.DeliveredAt(e.user, e.seq)
		if at.IsZero() {
			continue
		}
		r.Delivered++
		if e.at.Before(recovered) && at.After(last) {
			last = at
		}
	}
	if !last.IsZero() {
		r.RecoverySecs = round2(max(last.Sub(recovered), 0).Seconds())
	}
	_ = s.db.QueryRow(ctx, `SELECT count(*) FROM notify.notifications WHERE status = 'dead_lettered'`).Scan(&r.DeadLettered)
	r.OutOfOrder, r.Duplicates = int64(prov.OutOfOrder()), int64(prov.Repeats())
	r.BreakerOpened = breakerOpened(ctx, s.notifier)
	b.lanes().Outage = &r
	b.log.Info("provider outage", "events", r.Events, "delivered", r.Delivered, "dead_lettered", r.DeadLettered, "recovery_s", r.RecoverySecs)
	return nil
}

// backlog: a fresh notifier (log sender) drains a backlog of BacklogSize messages; its peak
// RSS is the point.
func (b *bench) backlog(ctx context.Context) error {
	done := b.step("notifier draining a large backlog")
	defer done()
	c := b.cfg
	topic, err := b.newTopic(ctx, "backlog", 8)
	if err != nil {
		return err
	}
	perUser := (c.BacklogSize + c.MQUsers - 1) / c.MQUsers
	mq, err := produceBacklog(ctx, []string{c.Namesrv}, c.RMQ, "bench-backlog-producer-"+b.ts, topic, c.MQUsers, c.MQSenders, perUser, 10*time.Minute, b.log)
	if err != nil {
		return err
	}
	u, err := b.newDB(ctx, "backlog")
	if err != nil {
		return err
	}
	db, err := pgxpool.New(ctx, u)
	if err != nil {
		return err
	}
	defer db.Close()
	_, nenv := b.productEnv(u, topic)
	t0 := time.Now()
	p, err := b.start(ctx, "notifier-backlog", "notifier", nenv)
	if err != nil {
		return err
	}
	defer b.stopProc("notifier-backlog")
	r, err := measureDrain(ctx, db, t0, mq.Sent, 5*time.Minute)
	if err != nil {
		return err
	}
	bl := Backlog{Messages: mq.Sent, Users: c.MQUsers, SMS: r.SMS, Seconds: r.Seconds, SMSPerS: r.SMSPerS, PeakRSSMiB: peakRSSMiB(p)}
	b.lanes().Backlog = &bl
	b.log.Info("backlog", "messages", bl.Messages, "sms", bl.SMS, "sms/s", bl.SMSPerS, "peak_rss_mib", bl.PeakRSSMiB)
	return nil
}

func (b *bench) lanes() *LaneBench {
	if b.res.Lanes == nil {
		b.res.Lanes = &LaneBench{}
	}
	return b.res.Lanes
}

// laneTargets checks the delivery lanes' targets.
func (r *Results) laneTargets() {
	if s := r.Slow; s != nil {
		want := 4 * s.QueueCeiling
		r.Targets = append(r.Targets, Target{What: fmt.Sprintf("SMS/s with a %d ms provider, %d users, %d queues, in order and once", s.DelayMS, s.Users, s.Queues),
			Want: fmt.Sprintf("≥ %.0f (4× one per queue)", want), Got: s.SMSPerS, Reached: s.SMSPerS >= want && s.OutOfOrder == 0 && s.Duplicates == 0})
	}
	if r.Lanes == nil {
		return
	}
	if i := r.Lanes.Isolation; i != nil {
		r.Targets = append(r.Targets, Target{What: fmt.Sprintf("others' p99 commit→SMS beside a user whose SMS always fail (open loop %.1f/s)", i.RatePerS),
			Want: "< 100 ms", Got: i.E2E.P99, Reached: i.E2E.P99 > 0 && i.E2E.P99 < 100 && i.Undelivered == 0})
	}
	if o := r.Lanes.Outage; o != nil {
		r.Targets = append(r.Targets,
			Target{What: fmt.Sprintf("dead letters after a %.0f s provider outage under load", o.OutageSecs), Want: "0", Got: float64(o.DeadLettered),
				Reached: o.DeadLettered == 0 && o.Delivered == o.Events && o.OutOfOrder == 0},
			Target{What: "every SMS delivered after the provider recovers, within (s)", Want: "≤ 5", Got: o.RecoverySecs,
				Reached: o.Delivered == o.Events && o.RecoverySecs <= 5})
	}
	if bl := r.Lanes.Backlog; bl != nil {
		r.Targets = append(r.Targets, Target{What: fmt.Sprintf("notifier peak RSS draining a %d-message backlog (MiB)", bl.Messages),
			Want: "< 100", Got: bl.PeakRSSMiB, Reached: bl.PeakRSSMiB > 0 && bl.PeakRSSMiB < 100 && bl.SMS == bl.Messages})
	}
}

// laneRows are the lane runs' lines of the "Notifier and resources" table.
func (r *Results) laneRows() [][]string {
	var rows [][]string
	if s := r.Slow; s != nil {
		rows = append(rows, []string{fmt.Sprintf("slow provider (%d ms/SMS, webhook), %d queues, %d active users, %d workers", s.DelayMS, s.Queues, s.Users, s.Workers),
			fmt.Sprintf("%.1f SMS/s over %.0fs, out of order %d, duplicates %d (one per queue would allow %.0f/s; the lanes %d × 1/%d ms = %.0f/s)",
				s.SMSPerS, s.WindowSecs, s.OutOfOrder, s.Duplicates, s.QueueCeiling, s.Workers, s.DelayMS, s.LaneCeiling)})
	}
	if r.Lanes == nil {
		return rows
	}
	if i := r.Lanes.Isolation; i != nil {
		rows = append(rows, []string{fmt.Sprintf("a user whose SMS always fail (503), every %d ms, among %d users at %.1f deposits/s", i.PoisonEveryMS, i.Users, i.RatePerS),
			fmt.Sprintf("others' commit→SMS p50 %.1f / p95 %.1f / p99 %.1f / max %.1f ms over %d events, %d undelivered, %d deposits refused or unanswered (p99 of its halves: commit→published %.1f, published→SMS %.1f ms); the failing user: %d events, %d provider calls; breaker opened %d×",
				i.E2E.P50, i.E2E.P95, i.E2E.P99, i.E2E.Max, i.Events, i.Undelivered, i.RequestErrors, i.ToPublished.P99, i.PublishedToSMS.P99, i.PoisonedEvents, i.PoisonedCalls, i.BreakerOpened)})
	}
	if o := r.Lanes.Outage; o != nil {
		rows = append(rows, []string{fmt.Sprintf("provider down (503) for %.0f s during %.0f s of %.1f deposits/s, %d users", o.OutageSecs, o.LoadSecs, o.RatePerS, o.Users),
			fmt.Sprintf("%d of %d delivered, %d dead-lettered, %d out of order, %d repeated keys refused, %d deposits refused or unanswered; the last SMS of the outage %.2f s after recovery; breaker opened %d×",
				o.Delivered, o.Events, o.DeadLettered, o.OutOfOrder, o.Duplicates, o.RequestErrors, o.RecoverySecs, o.BreakerOpened)})
	}
	if bl := r.Lanes.Backlog; bl != nil {
		rows = append(rows, []string{fmt.Sprintf("notifier draining a %d-message backlog (log sender, %d users, 8 queues)", bl.Messages, bl.Users),
			fmt.Sprintf("%d SMS in %.1f s = %.1f SMS/s; peak RSS %.1f MiB", bl.SMS, bl.Seconds, bl.SMSPerS, bl.PeakRSSMiB)})
	}
	return rows
}
