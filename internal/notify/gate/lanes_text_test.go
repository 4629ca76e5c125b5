package gate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// TestTheLanesSendTheTextRenderedOnArrival: the SMS text is rendered once, when the inbox
// receives the event; the lanes send the text stored then, not a text rendered again from the
// stored event (which, had the templates changed in between, would differ). Both a webhook
// provider and the journaled log sender get it, and the inbox row keeps it.
func TestTheLanesSendTheTextRenderedOnArrival(t *testing.T) {
	t.Parallel()
	const stored = "The text the inbox rendered on arrival. Balance: 1.00 CNY."
	ctx := context.Background()

	t.Run("webhook", func(t *testing.T) {
		t.Parallel()
		pool, _ := testdb.New(t)
		s := NewStore(pool)
		p := newProvider(t, pool)
		a := inbound(t, 8, 1, 100)
		require.NotEqual(t, stored, a.Text)
		a.Text = stored
		receive(t, s, false, a)
		startLanes(t, s, LaneConfig{Workers: 1, Sender: p.sender})
		wait.Until(t, 10*time.Second, "the SMS recorded sent", func() bool {
			return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id = 8 AND seq = 1 AND status = 'sent'`) == 1
		})
		calls := p.callsOf(firstKey(t, pool, 8))
		require.Len(t, calls, 1)
		require.Equal(t, stored, calls[0].Text)
		var text string
		require.NoError(t, pool.QueryRow(ctx, `SELECT text FROM notify.notifications WHERE user_id = 8 AND seq = 1`).Scan(&text))
		require.Equal(t, stored, text)
	})
	t.Run("journaled", func(t *testing.T) {
		t.Parallel()
		pool, _ := testdb.New(t)
		s := NewStore(pool)
		a := inbound(t, 9, 1, 100)
		a.Text = stored
		receive(t, s, false, a)
		startLanes(t, s, LaneConfig{Workers: 1, Sender: senders.NewLogSender(nil)})
		wait.Until(t, 10*time.Second, "the SMS logged", func() bool { return count(t, pool, `SELECT count(*) FROM notify.sms_log`) == 1 })
		var text string
		require.NoError(t, pool.QueryRow(ctx, `SELECT text FROM notify.sms_log WHERE user_id = 9 AND seq = 1 AND NOT late`).Scan(&text))
		require.Equal(t, stored, text)
	})
}
