package providersim

import (
	"context"
	"slices"
	"sync"
	"time"
)

// MemoryStore is a Store in this process's memory: what a bench's stub or a test needs,
// gone when the process ends.
type MemoryStore struct {
	mu      sync.Mutex
	charges map[string]*Charge
	orders  map[string]*Order
	payouts map[string]*Payout
	seq     int // order of creation, for listing
	created map[string]int
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{charges: map[string]*Charge{}, orders: map[string]*Order{}, payouts: map[string]*Payout{}, created: map[string]int{}}
}

func (m *MemoryStore) stamp(kind, key string) {
	m.seq++
	m.created[kind+"\x00"+key] = m.seq
}

// Charge implements Store.
func (m *MemoryStore) Charge(_ context.Context, c Charge) (Charge, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if got, ok := m.charges[c.Key]; ok {
		got.Attempts++
		return *got, nil
	}
	c.Attempts, c.CreatedAt = 1, time.Now()
	m.charges[c.Key] = &c
	m.stamp("c", c.Key)
	return c, nil
}

// Refund implements Store.
func (m *MemoryStore) Refund(_ context.Context, chargeKey, refundKey, voidID string) (Charge, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	got, ok := m.charges[chargeKey]
	if !ok {
		c := Charge{Key: chargeKey, ID: voidID, Status: ChargeVoided, RefundKey: refundKey, CreatedAt: time.Now()}
		m.charges[chargeKey] = &c
		m.stamp("c", chargeKey)
		return c, nil
	}
	if got.Status == ChargeCharged {
		got.Status, got.RefundKey = ChargeRefunded, refundKey
	}
	return *got, nil
}

// PlaceOrder implements Store.
func (m *MemoryStore) PlaceOrder(_ context.Context, o Order, pendingAttempts int) (Order, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if got, ok := m.orders[o.Key]; ok {
		got.Attempts++
		if got.Status == OrderPending && got.Attempts > pendingAttempts {
			got.Status = OrderPlaced
		}
		return *got, nil
	}
	o.Attempts, o.CreatedAt = 1, time.Now()
	m.orders[o.Key] = &o
	m.stamp("o", o.Key)
	return o, nil
}

// CancelOrder implements Store.
func (m *MemoryStore) CancelOrder(_ context.Context, orderKey, cancelKey, voidID string) (Order, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	got, ok := m.orders[orderKey]
	if !ok {
		o := Order{Key: orderKey, ID: voidID, Status: OrderVoided, CancelKey: cancelKey, CreatedAt: time.Now()}
		m.orders[orderKey] = &o
		m.stamp("o", orderKey)
		return o, nil
	}
	if got.Status == OrderPending {
		got.Status, got.CancelKey = OrderCancelled, cancelKey
	}
	return *got, nil
}

// Payout implements Store.
func (m *MemoryStore) Payout(_ context.Context, p Payout, pendingAttempts int) (Payout, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if got, ok := m.payouts[p.Key]; ok {
		got.Attempts++
		if got.Status == PayoutPending && got.Attempts > pendingAttempts {
			got.Status = PayoutPaid
		}
		return *got, nil
	}
	p.Attempts, p.CreatedAt = 1, time.Now()
	m.payouts[p.Key] = &p
	m.stamp("p", p.Key)
	return p, nil
}

// CancelPayout implements Store.
func (m *MemoryStore) CancelPayout(_ context.Context, payoutKey, cancelKey, voidID string) (Payout, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	got, ok := m.payouts[payoutKey]
	if !ok {
		p := Payout{Key: payoutKey, ID: voidID, Status: PayoutVoided, CancelKey: cancelKey, CreatedAt: time.Now()}
		m.payouts[payoutKey] = &p
		m.stamp("p", payoutKey)
		return p, nil
	}
	if got.Status == PayoutPending {
		got.Status, got.CancelKey = PayoutCancelled, cancelKey
	}
	return *got, nil
}

// Charges implements Store.
func (m *MemoryStore) Charges(context.Context) ([]Charge, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Charge, 0, len(m.charges))
	for _, c := range m.charges {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Charge) int { return m.created["c\x00"+a.Key] - m.created["c\x00"+b.Key] })
	return out, nil
}

// Orders implements Store.
func (m *MemoryStore) Orders(context.Context) ([]Order, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Order, 0, len(m.orders))
	for _, o := range m.orders {
		out = append(out, *o)
	}
	slices.SortFunc(out, func(a, b Order) int { return m.created["o\x00"+a.Key] - m.created["o\x00"+b.Key] })
	return out, nil
}

// Payouts implements Store.
func (m *MemoryStore) Payouts(context.Context) ([]Payout, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Payout, 0, len(m.payouts))
	for _, p := range m.payouts {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Payout) int { return m.created["p\x00"+a.Key] - m.created["p\x00"+b.Key] })
	return out, nil
}
