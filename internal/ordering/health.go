package ordering

import (
	"context"
	"fmt"
	"sync"

	"github.com/apache/rocketmq-client-go/v2/admin"
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
