package wallet_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/wallet"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

func TestOutboxPendingAndMarkPublished(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noRunner: true})
	a, b := e.user(t), e.user(t)
	_, err := e.pool.Exec(e.ctx, `UPDATE users SET locale = 'en', phone = '+12025550123' WHERE id = $1`, b)
	require.NoError(t, err)
	id := e.sagaID(t, a)
	// Interleave the two users' changes.
	for i := range 3 {
		for _, u := range []int64{a, b} {
			_, err := e.apply(e.ctx, wallet.Change{UserID: u, SagaID: id, Step: fmt.Sprintf("s%d", i), Amount: 100, Kind: walletevent.Deposit})
			require.NoError(t, err)
		}
	}
	out := wallet.NewOutboxStore(e.pool, 1, 0)
	pend, err := out.Pending(e.ctx, 100)
	require.NoError(t, err)
	require.Len(t, pend, 6)
	next := map[int64]int64{a: 1, b: 1}
	for i, p := range pend {
		if i > 0 {
			require.Greater(t, p.ID, pend[i-1].ID, "oldest first")
		}
		require.Equal(t, next[p.UserID], p.Seq, "each user's in seq order")
		next[p.UserID]++
		ev, err := walletevent.Decode(p.Body)
		require.NoError(t, err)
		require.Equal(t, p.ID, ev.EventID)
		require.Equal(t, p.UserID, ev.UserID)
		require.Equal(t, p.Seq, ev.Seq)
		require.Equal(t, walletevent.Deposit, ev.Kind)
		require.Equal(t, string(ev.Kind), p.Kind)
		require.Equal(t, int64(100), ev.Amount)
		require.Equal(t, 100*p.Seq, ev.BalanceAfter)
		require.Equal(t, "CNY", ev.Currency)
		require.Equal(t, id, ev.SagaID)
		require.False(t, ev.OccurredAt.IsZero())
		require.Equal(t, []string{strconv.FormatInt(p.ID, 10), ev.SeqKey()}, p.Keys)
		if p.UserID == b {
			require.Equal(t, "en", ev.Locale)
			require.Equal(t, "+12025550123", ev.Phone)
		} else {
			require.Equal(t, "zh-CN", ev.Locale)
		}
	}

	// A smaller limit gives a prefix of each user's stream.
	two, err := out.Pending(e.ctx, 2)
	require.NoError(t, err)
	require.Equal(t, pend[:2], two)

	require.NoError(t, out.MarkPublished(e.ctx, pend[0].ID, "msg-1"))
	require.NoError(t, out.MarkPublished(e.ctx, pend[0].ID, "msg-again"), "at least once: marking twice is fine")
	var msgID string
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT msg_id FROM wallet_events WHERE id = $1`, pend[0].ID).Scan(&msgID))
	require.Equal(t, "msg-1", msgID, "the first message id stays")
	require.ErrorIs(t, out.MarkPublished(e.ctx, 1<<40, "x"), wallet.ErrUnknownEvent)
	rest, err := out.Pending(e.ctx, 100)
	require.NoError(t, err)
	require.Equal(t, pend[1:], rest)

	evs, err := e.svc.ListEvents(e.ctx, pend[0].UserID, wallet.EventFilter{})
	require.NoError(t, err)
	require.True(t, evs[0].Published)
	require.False(t, evs[1].Published)

	// The relay marks a whole round in one statement.
	var ids []int64
	var msgIDs []string
	for i, p := range pend[1:] {
		ids = append(ids, p.ID)
		msgIDs = append(msgIDs, fmt.Sprintf("batch-%d", i))
	}
	require.NoError(t, out.MarkPublishedBatch(e.ctx, ids, msgIDs))
	rest, err = out.Pending(e.ctx, 100)
	require.NoError(t, err)
	require.Empty(t, rest, "the batch marked every remaining event")
	require.NoError(t, out.MarkPublishedBatch(e.ctx, ids, msgIDs), "marking twice is fine")
	require.ErrorIs(t, out.MarkPublishedBatch(e.ctx, []int64{ids[0], 1 << 40}, []string{"a", "b"}), wallet.ErrUnknownEvent)
}
