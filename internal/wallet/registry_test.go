package wallet

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// A saga kind declares the balance events it emits (sagaKind.Events), and the lists that
// must name every event kind are checked against those declarations; so they must be true.
// Each local step of each kind, forward and compensating, is run on an empty input and the
// event kinds of the balance changes it queues are collected: together, exactly the
// declared ones.
func TestDeclaredEventsAreWhatTheStepsEmit(t *testing.T) {
	t.Parallel()
	require.Len(t, sagaKinds, len(Kinds()))
	for _, k := range sagaKinds {
		d := k.Define(parties{})
		require.Equal(t, k.Name, d.Kind)
		emitted := map[walletevent.Kind]bool{}
		for _, st := range d.Steps {
			for _, a := range []saga.Action{st.Do, st.Compensate} {
				if a.Local == nil {
					continue
				}
				b := &pgx.Batch{}
				o := a.Local(&saga.Instance{ID: 1, Kind: k.Name, Input: []byte(`{}`)}, b)
				require.Equal(t, saga.OutcomeDone, o.Kind, "%s %s", k.Name, st.Name)
				for _, q := range b.QueuedQueries {
					if strings.Contains(q.SQL, "INSERT INTO wallet_events") {
						args, ok := q.Arguments[0].(pg.Args)
						require.True(t, ok, "%s %s: the change's named arguments", k.Name, st.Name)
						kind, ok := args["kind"].(string)
						require.True(t, ok, "%s %s: the event kind argument", k.Name, st.Name)
						emitted[walletevent.Kind(kind)] = true
					}
				}
			}
		}
		var got []walletevent.Kind
		for ev := range emitted {
			got = append(got, ev)
		}
		require.ElementsMatch(t, k.Events, got, "saga kind %s", k.Name)
	}
}
