package wallet_test

import (
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// A sign-up whose id another user took meanwhile (two transactions drew the same id in the
// same millisecond: neither saw the other's) is refused by the primary key, and CreateUser
// sends it again for a new id. Here a trigger of the test's own hands the insert an id that
// is taken, for its first tries: two of them are taken in stride; a collision that does not
// end is an internal error after a few tries, with nothing created.
func TestASignUpWhoseIDIsTakenGetsAnother(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	taken := e.user(t)
	// The trigger's count is a sequence: nextval is not rolled back with the refused insert.
	_, err := e.pool.Exec(e.ctx, `
		CREATE SEQUENCE tries;
		CREATE TABLE collide (id bigint NOT NULL, tries bigint NOT NULL);
		CREATE FUNCTION collide() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('tries') <= (SELECT tries FROM collide) THEN
				NEW.id := (SELECT id FROM collide);
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER collide BEFORE INSERT ON users FOR EACH ROW EXECUTE FUNCTION collide()`)
	require.NoError(t, err)
	users := func() int {
		var n int
		require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM users`).Scan(&n))
		return n
	}

	for _, c := range []struct {
		collisions int
		created    bool
	}{{2, true}, {1000, false}} {
		_, err := e.pool.Exec(e.ctx, `SELECT setval('tries', 1, false)`)
		require.NoError(t, err)
		_, err = e.pool.Exec(e.ctx, `TRUNCATE collide`)
		require.NoError(t, err)
		_, err = e.pool.Exec(e.ctx, `INSERT INTO collide VALUES ($1, $2)`, taken, c.collisions)
		require.NoError(t, err)
		before := users()
		u, _, err := e.svc.CreateUser(e.ctx, wallet.NewUser{Name: "Second Comer", Phone: "+8613800138001"})
		var tries int
		require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT last_value FROM tries`).Scan(&tries))
		if c.created {
			require.Equal(t, c.collisions+1, tries, "tried again after each collision")
			require.NoError(t, err, "%d collisions", c.collisions)
			require.NotEqual(t, taken, u.ID)
			require.Positive(t, u.ID)
			require.Equal(t, before+1, users())
			w, err := e.svc.GetWallet(e.ctx, u.ID)
			require.NoError(t, err)
			require.Equal(t, u.ID, w.UserID)
			continue
		}
		require.True(t, tries >= 2 && tries < 10, "gave up after a few tries, not %d", tries)
		require.True(t, pg.IsViolation(err, pgerrcode.UniqueViolation, "users_pkey"), "%v", err)
		require.Equal(t, apperr.Internal, apperr.CodeOf(err), "%v", err)
		require.Equal(t, before, users(), "nothing created")
	}
	u, err := e.svc.GetUser(e.ctx, taken)
	require.NoError(t, err)
	require.Equal(t, "Test User", u.Name, "the user who had the id first keeps it")
}
