package wallet_test

import (
	"context"
	"maps"
	"regexp"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/wallet"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// checkValue is one quoted value in a CHECK constraint's definition ('deposit'::text).
var checkValue = regexp.MustCompile(`'([^']*)'::text`)

// checkValues returns the values constraint allows, a CHECK (VALUE IN (…)) of the domain
// that is table.column's type, as Postgres states the constraint in its catalogue, after
// every migration.
func checkValues(t *testing.T, pool *pgxpool.Pool, table, column, constraint string) []string {
	t.Helper()
	var def string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
		JOIN pg_attribute a ON a.atttypid = c.contypid
		WHERE a.attrelid = $1::regclass AND a.attname = $2 AND c.conname = $3 AND c.contype = 'c'`,
		table, column, constraint).Scan(&def), "%s on %s.%s's type", constraint, table, column)
	var out []string
	for _, m := range checkValue.FindAllStringSubmatch(def, -1) {
		out = append(out, m[1])
	}
	require.NotEmpty(t, out, "no values in %s", def)
	return out
}

// The database allows exactly the kinds the code knows: wallet_events.kind the event kinds
// of walletevent (the one list), wallet_operations.kind the saga kinds this package
// registers. A kind added to the code without its migration (or the other way round) fails
// here, not in production at its first commit.
func TestTheDatabaseChecksAllowExactlyTheKinds(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	var events []string
	for _, k := range walletevent.Kinds() {
		events = append(events, string(k))
	}
	require.ElementsMatch(t, events, checkValues(t, pool, "wallet_events", "kind", "wallet_events_kind_check"))
	require.ElementsMatch(t, wallet.Kinds(), checkValues(t, pool, "wallet_operations", "kind", "wallet_operations_kind_check"))
}

// Every kind of balance change is emitted by exactly one saga kind, and every saga kind emits
// only kinds walletevent knows: an event kind no saga emits is dead weight in every list
// that must name it, and one emitted by two sagas would tell one of them's users the other's
// SMS text ("Refund … for a cancelled purchase" after a withdrawal).
func TestEachEventKindBelongsToOneSagaKind(t *testing.T) {
	t.Parallel()
	emitters := map[walletevent.Kind][]string{}
	byKind := wallet.EventKinds()
	require.ElementsMatch(t, wallet.Kinds(), slices.Collect(maps.Keys(byKind)))
	for sagaKind, events := range byKind {
		require.NotEmpty(t, events, "%s emits no balance event", sagaKind)
		for _, ev := range events {
			require.True(t, ev.Valid(), "%s emits %q, which walletevent does not know", sagaKind, ev)
			emitters[ev] = append(emitters[ev], sagaKind)
		}
	}
	for _, ev := range walletevent.Kinds() {
		require.Len(t, emitters[ev], 1, "event kind %q is emitted by %v", ev, emitters[ev])
	}
}
