package ordering

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"

	"github.com/walletsaga/walletsaga/internal/lifecycle"
)

// RouteCheck answers readiness: the name server answers and routes topic to at least one
// writable queue on a live broker.
type RouteCheck struct {
	namesrv []string
	topic   string
	creds   Credentials

	mu  sync.Mutex
	adm admin.Admin
}

// NewRouteCheck returns a check for topic through the given name servers, its requests
// signed with creds (zero: unsigned; the name server checks no signature, see
// docs/ARCHITECTURE.md, but a signing client signs everything it sends).
func NewRouteCheck(namesrv []string, topic string, creds Credentials) *RouteCheck {
	return &RouteCheck{namesrv: namesrv, topic: topic, creds: creds}
}

// Check returns nil when topic has writable queues.
func (r *RouteCheck) Check(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.adm == nil {
		adm, err := NewAdmin(r.namesrv, r.creds)
		if err != nil {
			return err
		}
		r.adm = adm
	}
	mqs, err := r.adm.FetchPublishMessageQueues(ctx, r.topic)
	if err != nil {
		return fmt.Errorf("rocketmq: route of %s: %w", r.topic, err)
	}
	if len(mqs) == 0 {
		return fmt.Errorf("rocketmq: topic %s has no writable queue", r.topic)
	}
	return nil
}

// Close releases the admin client.
func (r *RouteCheck) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.adm == nil {
		return nil
	}
	err := r.adm.Close()
	r.adm = nil
	return err
}

// BrokerWatch keeps the broker's state for probes and metrics without asking the name
// server on every probe: once started it checks the route every interval, Check and
// Reachable answer from the last result. The broker being away is not a reason for a process to leave its
// load balancer (walletsvc keeps events in its outbox, the notifier serves its read API and
// drains its inbox), so this state is reported, not enforced.
type BrokerWatch struct {
	// Runner checks in the background between Start and Stop.
	*lifecycle.Runner
	route    *RouteCheck
	interval time.Duration

	mu    sync.Mutex
	err   error
	since time.Time
}

// NewBrokerWatch returns a watch over route, checking every interval (default 5s). Until its
// first check it reports the broker as not yet checked.
func NewBrokerWatch(route *RouteCheck, interval time.Duration) *BrokerWatch {
	if interval <= 0 {
		interval = 5 * time.Second
	}
	w := &BrokerWatch{route: route, interval: interval, err: errors.New("not checked yet"), since: time.Now()}
	w.Runner = lifecycle.NewRunner(w.watch)
	return w
}

// watch checks the route until ctx ends.
func (w *BrokerWatch) watch(ctx context.Context) error {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, w.interval)
		err := w.route.Check(cctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		w.mu.Lock()
		if (err == nil) != (w.err == nil) {
			w.since = time.Now()
		}
		w.err = err
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Check returns the last check's error (nil: reachable), saying since when it fails.
func (w *BrokerWatch) Check(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		return nil
	}
	return fmt.Errorf("unreachable since %s: %w", w.since.UTC().Format(time.RFC3339), w.err)
}

// Reachable reports whether the last check passed.
func (w *BrokerWatch) Reachable() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err == nil
}
