package main

import (
	"context"
	"strconv"
	"time"

	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// outboxAdapter presents the wallet's outbox to the relay: an event's sharding key is its
// user id in decimal.
type outboxAdapter struct{ s *wallet.OutboxStore }

func (a outboxAdapter) Lead(ctx context.Context) (context.Context, func(), error) {
	return a.s.Lead(ctx)
}

func (a outboxAdapter) Pending(ctx context.Context, s ordering.Slice, c ordering.Cursor, skip []int64, limit int) (ordering.Page, error) {
	q := wallet.QueueSlice{FNV: s.Hash == ordering.HashFNV, Count: s.Count, Index: s.Index}
	page, err := a.s.Pending(ctx, q, c.After, c.Horizon, skip, limit)
	if err != nil {
		return ordering.Page{}, err
	}
	out := ordering.Page{Records: make([]ordering.OutboxRecord, len(page.Events)), Last: page.Last, Horizon: page.Horizon}
	for i, ev := range page.Events {
		out.Records[i] = outboxRecord(ev)
	}
	return out, nil
}

func (a outboxAdapter) Strays(ctx context.Context, held []int64, olderThan time.Duration, limit int) ([]string, error) {
	users, err := a.s.Strays(ctx, held, olderThan, limit)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(users))
	for i, u := range users {
		keys[i] = strconv.FormatInt(u, 10)
	}
	return keys, nil
}

// outboxRecord is ev as the relay sends it.
func outboxRecord(ev wallet.PendingEvent) ordering.OutboxRecord {
	return ordering.OutboxRecord{ID: ev.ID, Key: strconv.FormatInt(ev.UserID, 10), Seq: ev.Seq, Tag: ev.Kind,
		Keys: ev.Keys, Body: ev.Body, At: ev.OccurredAt, Pred: ev.Pred, Traceparent: ev.Traceparent}
}

func (a outboxAdapter) MarkPublished(ctx context.Context, recs []ordering.Published) error {
	ids, msgIDs := make([]int64, len(recs)), make([]string, len(recs))
	for i, r := range recs {
		ids[i], msgIDs[i] = r.ID, r.MsgID
	}
	return a.s.MarkPublishedBatch(ctx, ids, msgIDs)
}
