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

// LaneBench is what the delivery lanes showed under a failing user, a provider outage and a
// large backlog.
type LaneBench struct {
	Isolation *Isolation `json:"failing_user,omitempty"`
	Outage    *Outage    `json:"provider_outage,omitempty"`
	Backlog   *Backlog   `json:"backlog,omitempty"`
}

func (b *bench) lanes() *LaneBench {
	if b.res.Lanes == nil {
		b.res.Lanes = &LaneBench{}
	}
	return b.res.Lanes
}

// laneStack is walletsvc plus a notifier whose webhook goes to prov, on a database, topic
// and payment gateway and merchant stub of their own, with users created.
type laneStack struct {
	api      apiClient
	db       *pgxpool.Pool
	users    []int64
	notifier *proc
	stub     *providerStub
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
	// A gateway and merchant of the stack's own: their keys are the saga ids, which a fresh
	// database numbers from 1 again, and the product's stub, which saw those ids, would
	// refuse every deposit.
	stub, err := startProviderStub(ctx, 0)
	if err != nil {
		return nil, err
	}
	s := &laneStack{stub: stub}
	wenv, nenv := b.productEnv(u, topic)
	wenv["PAYMENT_GATEWAY_URL"], wenv["MERCHANT_URL"] = stub.URL, stub.URL
	nenv["SMS_SENDER"], nenv["SMS_WEBHOOK_URL"] = "webhook", prov.URL()
	ws, err := b.start(ctx, name+"-walletsvc", "walletsvc", wenv)
	if err != nil {
		return s, err
	}
	if s.notifier, err = b.start(ctx, name+"-notifier", "notifier", nenv); err != nil {
		return s, err
	}
	if s.db, err = pgxpool.New(ctx, u); err != nil {
		return s, err
	}
	s.api = newAPIClient(ws.URL)
	if s.users, err = createUsers(ctx, s.api, users, 16, b.tag+int64(len(name))); err != nil {
		return s, fmt.Errorf("creating users: %w", err)
	}
	return s, nil
}

// stopLaneStack stops what startLaneStack started, also when it failed half way.
func (b *bench) stopLaneStack(name string, s *laneStack) {
	if s != nil && s.db != nil {
		s.db.Close()
	}
	b.stopProc(name + "-walletsvc")
	b.stopProc(name + "-notifier")
	if s != nil {
		s.stub.close()
	}
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

// lastEventID is the outbox's highest id: ids grow, so the events of a run that starts now
// have higher ones.
func (s *laneStack) lastEventID(ctx context.Context) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, `SELECT COALESCE(max(id), 0) FROM wallet_events`).Scan(&id)
	return id, err
}

// eventsOf returns the events with an id above after committed in [from, to), with their
// commit and publish times: the id bounds the scan to the run's rows (the primary key), the
// times leave out what committed after the run.
func eventsOf(ctx context.Context, db *pgxpool.Pool, after int64, from, to time.Time) ([]eventTime, error) {
	rows, err := db.Query(ctx, `SELECT user_id, seq, occurred_at, published_at FROM wallet_events
		WHERE id > $1 AND occurred_at >= $2 AND occurred_at < $3`, after, from, to)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (eventTime, error) {
		var e eventTime
		return e, r.Scan(&e.user, &e.seq, &e.at, &e.published)
	})
}

// laneRate is the open-loop rate of the lane runs: the half load's (half the best deposit
// rate of the product's default phases), else half the best deposit rate the product phases
// reached when the half load did not run, else the configured fallback. Phases of other
// settings do not count: a deposit phase of the retention part (pruning off) once ran 20%
// faster than the default ones, and the lanes ran 20% above the half load they stand for.
func (b *bench) laneRate() float64 {
	if b.res.HalfLoad != nil && b.res.HalfLoad.OpenRate > 0 {
		return b.res.HalfLoad.OpenRate
	}
	best := 0.0
	for _, ph := range b.res.Phases {
		if ph.Kind == "deposit" && ph.Setting == "" && ph.OpenRate == 0 {
			best = max(best, ph.SagasPerS)
		}
	}
	if best > 0 {
		return round2(best / 2)
	}
	return b.cfg.LaneRate
}

// waitAccepted waits (up to the drain time) until the provider accepted every event with an
// id above after committed in [from, to) of users other than except, and returns those
// events.
func (b *bench) waitAccepted(ctx context.Context, db *pgxpool.Pool, prov *smsprovider.Provider, after int64, from, to time.Time, except int64) ([]eventTime, error) {
	deadline := time.Now().Add(b.cfg.Drain)
	for {
		all, err := eventsOf(ctx, db, after, from, to)
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
		// No event at all is no success: the load's sagas may not have committed yet.
		if (missing == 0 && len(evs) > 0) || time.Now().After(deadline) || ctx.Err() != nil {
			return evs, nil
		}
		time.Sleep(500 * time.Millisecond)
	}
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
			Want: "< 100 ms", Got: i.E2E.P99, Reached: i.Events > 0 && i.E2E.P99 > 0 && i.E2E.P99 < 100 && i.Undelivered == 0})
	}
	if o := r.Lanes.Outage; o != nil {
		r.Targets = append(r.Targets,
			Target{What: fmt.Sprintf("dead letters after a %.0f s provider outage under load", o.OutageSecs), Want: "0", Got: float64(o.DeadLettered),
				Reached: o.Events > 0 && o.DeadLettered == 0 && o.Delivered == o.Events && o.OutOfOrder == 0},
			Target{What: fmt.Sprintf("every SMS delivered after a %.0f s provider outage, within (s) of the recovery", o.OutageSecs), Want: "≤ 5", Got: o.RecoverySecs,
				Reached: o.Events > 0 && o.Delivered == o.Events && o.RecoverySecs <= 5})
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
