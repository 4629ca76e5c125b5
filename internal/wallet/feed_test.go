package wallet_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/providersim"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testutil/simtest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// fakeRelay records what an OutboxFeed hands the relay.
type fakeRelay struct {
	mu     sync.Mutex
	offers []ordering.OutboxRecord
	wakes  []string
}

func (r *fakeRelay) Offer(rec ordering.OutboxRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.offers = append(r.offers, rec)
}

func (r *fakeRelay) WakeKey(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wakes = append(r.wakes, key)
}

// A deposit's commit hands its balance event to the relay the feed wakes, as the relay would
// read it through the same feed (keyed by the user id in decimal); the relay's reads, strays
// and marks go through the feed to the outbox. Before a relay is set, nothing is handed over
// and the event waits in the outbox.
func TestOutboxFeedHandsTheCommittedEventToTheRelay(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	prov := simtest.Start(t, nil, providersim.Options{})
	feed := wallet.NewOutboxFeed(wallet.NewOutboxStore(pool, 1, 0))
	svc, err := wallet.NewService(pool, testEngine(pool, "", log), prov.Gateway, prov.Merchant,
		wallet.Options{Logger: log, Steps: fastSteps, EventCommitted: feed.Committed})
	require.NoError(t, err)
	u, _, err := svc.CreateUser(ctx, wallet.NewUser{Name: "Test User", Phone: "+8613800138000"})
	require.NoError(t, err)
	deposit := func() {
		op, err := svc.Deposit(ctx, wallet.DepositRequest{UserID: u.ID, Amount: 100})
		require.NoError(t, err)
		op, err = svc.WaitSaga(ctx, op.ID)
		require.NoError(t, err)
		require.Equal(t, saga.Completed, op.State)
	}

	deposit() // no relay yet: the event is only in the outbox
	relay := &fakeRelay{}
	feed.Wakes(relay)
	deposit()

	relay.mu.Lock()
	offers, wakes := relay.offers, relay.wakes
	relay.mu.Unlock()
	require.Empty(t, wakes, "each commit knew its predecessor")
	require.Len(t, offers, 1, "only the event committed once the relay was set")
	key := strconv.FormatInt(u.ID, 10)
	require.Equal(t, key, offers[0].Key)
	require.Equal(t, int64(2), offers[0].Seq)

	page, err := feed.Pending(ctx, ordering.Slice{Hash: ordering.HashJava, Count: 1}, ordering.Cursor{}, nil, 10)
	require.NoError(t, err)
	require.Len(t, page.Records, 2)
	read := page.Records[1]
	require.Equal(t, offers[0].Pred, page.Records[0].ID, "handed over with its unpublished predecessor")
	require.Equal(t, read, offers[0], "handed over as the relay reads it")
	require.Equal(t, key, page.Records[0].Key)

	strays, err := feed.Strays(ctx, []int64{read.ID}, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []string{key}, strays, "the first event, which nobody holds")

	require.NoError(t, feed.MarkPublished(ctx, []ordering.Published{{ID: page.Records[0].ID, MsgID: "m1"}, {ID: read.ID, MsgID: "m2"}}))
	page, err = feed.Pending(ctx, ordering.Slice{Hash: ordering.HashJava, Count: 1}, ordering.Cursor{}, nil, 10)
	require.NoError(t, err)
	require.Empty(t, page.Records)
}
