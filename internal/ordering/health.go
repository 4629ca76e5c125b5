package ordering

import (
	"context"
	"fmt"
	"sync"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// RouteCheck answers readiness: the name server answers and routes topic to at least one
// writable queue on a live broker.
type RouteCheck struct {
	namesrv []string
	topic   string

	mu  sync.Mutex
	adm admin.Admin
}

// NewRouteCheck returns a check for topic through the given name servers.
func NewRouteCheck(namesrv []string, topic string) *RouteCheck {
	return &RouteCheck{namesrv: namesrv, topic: topic}
}

// Check returns nil when topic has writable queues.
func (r *RouteCheck) Check(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.adm == nil {
		adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver(r.namesrv)))
		if err != nil {
			return fmt.Errorf("rocketmq admin: %w", err)
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
