package wallet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/providersim"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testutil/simtest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// The provider keys' tests: saga ids repeat across databases (another deployment, or this
// one restored from a backup), and the idempotency keys sent to the gateway must not.

// chargeOf returns the charge id a completed deposit saga stored, and checks that the
// provider holds that charge under the saga's own key.
func chargeOf(t *testing.T, e *env, op wallet.Operation) string {
	t.Helper()
	s, err := e.eng.Get(e.ctx, op.ID)
	require.NoError(t, err)
	var data struct {
		ChargeID string `json:"charge_id"`
	}
	require.NoError(t, json.Unmarshal(s.Data, &data))
	require.NotEmpty(t, data.ChargeID)
	key := saga.StepKey(op.ProviderKeyPrefix, "charge")
	for _, c := range e.prov.Charges(t) {
		if c.Key == key {
			require.Equal(t, data.ChargeID, c.ID, "the charge made under the saga's key")
			require.Equal(t, providersim.ChargeCharged, c.Status)
			return data.ChargeID
		}
	}
	require.Failf(t, "no charge under the saga's key", "key %s", key)
	return ""
}

// deposit runs a deposit to its end and returns it, completed.
func (e *env) deposit(t *testing.T, user int64, amount wallet.Money) wallet.Operation {
	t.Helper()
	op, err := e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: user, Amount: amount})
	require.NoError(t, err)
	op = e.wait(t, op.ID)
	require.Equal(t, saga.Completed, op.State, "%+v", op.Error)
	return op
}

// userWithID creates a user with the given id, and its wallet, as an import of users from
// elsewhere would (the ids the wallet mints are the clock's, so no two databases give the
// same one but by chance).
func (e *env) userWithID(t *testing.T, id int64) {
	t.Helper()
	_, err := e.pool.Exec(e.ctx, `WITH u AS (INSERT INTO users (id, name, phone) VALUES ($1, 'Test User', '+8613800138000') RETURNING id)
		INSERT INTO wallets (user_id) SELECT id FROM u`, id)
	require.NoError(t, err)
}

// Two deployments, each with a database of its own, share one gateway. Their first deposits
// have the same saga id (and the same user id, amount and source): the gateway must make two
// charges, and each wallet be credited for its own.
func TestDeploymentsSharingAGatewayChargeApart(t *testing.T) {
	t.Parallel()
	p := simtest.Start(t, nil, providersim.Options{})
	one, two := newEnv(t, envOptions{prov: p}), newEnv(t, envOptions{prov: p})
	u := one.user(t)
	two.userWithID(t, u)

	op1 := one.deposit(t, u, 5000)
	op2 := two.deposit(t, u, 5000)
	require.Equal(t, op1.ID, op2.ID, "both databases number sagas alike")

	require.Len(t, p.Charges(t), 2, "a charge for each deployment's deposit")
	require.Equal(t, 2, p.ChargesIn(t, providersim.ChargeCharged))
	c1, c2 := chargeOf(t, one, op1), chargeOf(t, two, op2)
	require.NotEqual(t, c1, c2, "each deposit credited against a charge of its own")
	require.Equal(t, wallet.Money(5000), one.balance(t, u))
	require.Equal(t, wallet.Money(5000), two.balance(t, u))
	one.checkInvariants(t, u)
	two.checkInvariants(t, u)
	for _, op := range []wallet.Operation{op1, op2} {
		require.Regexp(t, fmt.Sprintf(`^%d-[0-9a-f]{32}$`, op.ID), op.ProviderKeyPrefix, "the saga id and its nonce")
	}
}

// A database restored from a backup taken before a charge: the deposit made after the
// backup is lost with the restore, and the restored database gives its next deposit the same
// saga id again. That deposit must be charged anew, not answered with the lost deposit's
// charge.
func TestRestoredDatabaseChargesAnew(t *testing.T) {
	t.Parallel()
	p := simtest.Start(t, nil, providersim.Options{})
	pool, dbURL := testdb.New(t)
	before := newEnvOn(t, pool, envOptions{prov: p, noRunner: true})
	u := before.user(t)
	before.deposit(t, u, 1000)
	pool.Close() // nothing may be connected while the database is copied

	backup, _ := testdb.Copy(t, dbURL)

	// The charge the backup does not know of.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	lost := newEnvOn(t, pool, envOptions{prov: p})
	opLost := lost.deposit(t, u, 5000)
	chargeLost := chargeOf(t, lost, opLost)
	require.Equal(t, wallet.Money(6000), lost.balance(t, u))

	// The restore: the backup takes over, and deposits the same again.
	restored := newEnvOn(t, backup, envOptions{prov: p})
	require.Equal(t, wallet.Money(1000), restored.balance(t, u), "as backed up")
	op := restored.deposit(t, u, 5000)
	require.Equal(t, opLost.ID, op.ID, "the restored database gives the saga id again")

	require.Len(t, p.Charges(t), 3, "the first deposit's, the lost one's, and the restored database's own")
	require.Equal(t, 3, p.ChargesIn(t, providersim.ChargeCharged))
	require.NotEqual(t, opLost.ProviderKeyPrefix, op.ProviderKeyPrefix)
	require.NotEqual(t, chargeLost, chargeOf(t, restored, op), "credited against a charge of its own")
	require.Equal(t, wallet.Money(6000), restored.balance(t, u))
	restored.checkInvariants(t, u)
}
