package wallet

// The hand-off between the saga commits and the outbox relay: OutboxFeed.

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/walletsaga/walletsaga/internal/ordering"
)

// FeedRelay is what an OutboxFeed wakes: the outbox relay of this process
// (*ordering.Relay). Both calls must be quick and must not block.
type FeedRelay interface {
	// Offer hands over a record just committed, to be sent without reading the outbox.
	Offer(rec ordering.OutboxRecord)
	// WakeKey has the queue of key read the outbox.
	WakeKey(key string)
}

// OutboxFeed is the wallet's outbox (wallet_events) as the relay takes it, and the way a
// balance event goes from the saga commit that wrote it to that relay:
//
//   - the saga engine's commit calls Committed (it is Options.EventCommitted, called from a
//     balance step's Instance.AfterCommit) for each event it wrote, which wakes the relay
//     set with Wakes: the pump of the user's queue takes the event as it is (Offer) or, when
//     the commit could not tell its predecessor, reads the user's queue (WakeKey);
//   - the relay (ordering.Relay, which takes the feed as its ordering.Outbox) reads the
//     unpublished rows through it (Lead, Pending, Strays) and marks what the broker stored
//     (MarkPublished), each by OutboxStore's SQL.
//
// An event's sharding key is its user id in decimal.
type OutboxFeed struct {
	store *OutboxStore
	relay atomic.Pointer[FeedRelay]
}

var _ ordering.Outbox = (*OutboxFeed)(nil)

// NewOutboxFeed returns the feed over store; Wakes names the relay it wakes.
func NewOutboxFeed(store *OutboxStore) *OutboxFeed {
	return &OutboxFeed{store: store}
}

// Wakes sets the relay Committed wakes. Until it is set, Committed does nothing: the events
// stay in the outbox, where a relay finds them.
func (f *OutboxFeed) Wakes(r FeedRelay) { f.relay.Store(&r) }

// Committed tells the relay of ev, a balance event a saga commit just wrote (see
// Options.EventCommitted): complete, it is offered as it is; otherwise its user's queue is
// read. It never blocks.
func (f *OutboxFeed) Committed(ev PendingEvent, complete bool) {
	r := f.relay.Load()
	if r == nil {
		return
	}
	if complete {
		(*r).Offer(ev.Record())
	} else {
		(*r).WakeKey(strconv.FormatInt(ev.UserID, 10))
	}
}

// Record is ev as the relay sends it.
func (ev PendingEvent) Record() ordering.OutboxRecord {
	return ordering.OutboxRecord{ID: ev.ID, Key: strconv.FormatInt(ev.UserID, 10), Seq: ev.Seq, Tag: ev.Kind,
		Keys: ev.Keys, Body: ev.Body, At: ev.OccurredAt, Pred: ev.Pred, Traceparent: ev.Traceparent}
}

// Lead is OutboxStore.Lead: the relay lock.
func (f *OutboxFeed) Lead(ctx context.Context) (context.Context, func(), error) {
	return f.store.Lead(ctx)
}

// Pending reads the unpublished events of the relay's queue s from cursor c
// (OutboxStore.Pending).
func (f *OutboxFeed) Pending(ctx context.Context, s ordering.Slice, c ordering.Cursor, skip []int64, limit int) (ordering.Page, error) {
	q := QueueSlice{FNV: s.Hash == ordering.HashFNV, Count: s.Count, Index: s.Index}
	page, err := f.store.Pending(ctx, q, c.After, c.Horizon, skip, limit)
	if err != nil {
		return ordering.Page{}, err
	}
	out := ordering.Page{Records: make([]ordering.OutboxRecord, len(page.Events)), Last: page.Last, Horizon: page.Horizon}
	for i, ev := range page.Events {
		out.Records[i] = ev.Record()
	}
	return out, nil
}

// Strays returns the keys (user ids) of unpublished events nobody handed to the relay
// (OutboxStore.Strays).
func (f *OutboxFeed) Strays(ctx context.Context, held []int64, olderThan time.Duration, limit int) ([]string, error) {
	users, err := f.store.Strays(ctx, held, olderThan, limit)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(users))
	for i, u := range users {
		keys[i] = strconv.FormatInt(u, 10)
	}
	return keys, nil
}

// MarkPublished marks recs published, each with the message id the broker gave it
// (OutboxStore.MarkPublishedBatch).
func (f *OutboxFeed) MarkPublished(ctx context.Context, recs []ordering.Published) error {
	ids, msgIDs := make([]int64, len(recs)), make([]string, len(recs))
	for i, r := range recs {
		ids[i], msgIDs[i] = r.ID, r.MsgID
	}
	return f.store.MarkPublishedBatch(ctx, ids, msgIDs)
}
