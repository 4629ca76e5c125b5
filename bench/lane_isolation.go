package main

import (
	"context"
	"fmt"
	"time"

	"github.com/walletsaga/walletsaga/internal/testutil/smsprovider"
)

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
	after, err := s.lastEventID(ctx)
	if err != nil {
		return err
	}
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
	evs, err := b.waitAccepted(ctx, s.db, prov, after, from, to, poisoned)
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
