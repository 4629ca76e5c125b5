package wallet_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/wallet"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// TestEventVersion1WritesWhatThePreviousReleaseWrote: a replica with EventVersion 1 (an
// upgrade's first step, beside a notifier of the previous release) writes its events
// without an epoch, and the relay sends them as version 1 bodies, which that notifier reads;
// the wallet's epoch is left as it was. A replica with the default then writes the user's
// next event in the current epoch, saying it is the user's first seq there: the notifier,
// which saw only version 1 bodies of this user, sets nothing aside. While the replicas are
// restarted one by one (the upgrade's last step) the two kinds write side by side, and each
// event goes out as it was written.
func TestEventVersion1WritesWhatThePreviousReleaseWrote(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	var epoch int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT max(epoch) FROM wallet_epochs`).Scan(&epoch))
	v1 := newEnvOn(t, pool, envOptions{eventVersion: 1})
	v2 := newEnvOn(t, pool, envOptions{})
	user := v1.user(t)
	walletEpoch := func() [2]int64 {
		var e [2]int64
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT epoch, epoch_since FROM wallets WHERE user_id = $1`, user).Scan(&e[0], &e[1]))
		return e
	}

	v1.fund(t, user, 100)
	v1.fund(t, user, 200)
	require.Equal(t, [][3]int64{{1, 0, 1}, {2, 0, 1}}, eventEpochs(t, pool, user))
	require.Equal(t, [2]int64{0, 1}, walletEpoch(), "the wallet's epoch is left as it was")

	v2.fund(t, user, 300)
	require.Equal(t, [3]int64{3, epoch, 3}, eventEpochs(t, pool, user)[2], "the first event in the epoch starts it")
	v1.fund(t, user, 400)
	v2.fund(t, user, 500)
	require.Equal(t, [][3]int64{{1, 0, 1}, {2, 0, 1}, {3, epoch, 3}, {4, 0, 1}, {5, epoch, 3}}, eventEpochs(t, pool, user))
	require.Equal(t, [2]int64{epoch, 3}, walletEpoch())

	feed := wallet.NewOutboxFeed(wallet.NewOutboxStore(pool, 7422, 0))
	page, err := feed.Pending(v1.ctx, ordering.Slice{Hash: ordering.HashJava, Count: 1}, ordering.Cursor{}, nil, 10)
	require.NoError(t, err)
	var versions [][3]int64
	for _, r := range page.Records {
		ev, err := walletevent.Decode(r.Body)
		require.NoError(t, err)
		if ev.UserID == user {
			versions = append(versions, [3]int64{int64(ev.V), ev.Epoch, ev.EpochSince})
		}
	}
	require.Equal(t, [][3]int64{{1, 0, 0}, {1, 0, 0}, {2, epoch, 3}, {1, 0, 0}, {2, epoch, 3}}, versions, "each body as its event was written")
}

// TestEventVersionIsOneOrTheCurrent: any other version is refused.
func TestEventVersionIsOneOrTheCurrent(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	e := newEnvOn(t, pool, envOptions{noRunner: true})
	for _, v := range []int{-1, 3, 10} {
		_, err := wallet.NewService(pool, e.eng, e.prov.Gateway, e.prov.Merchant, wallet.Options{EventVersion: v})
		require.ErrorContains(t, err, "event version", "%d", v)
	}
}
