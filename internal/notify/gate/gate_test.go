package gate

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// outcomeOf is an outcome recorded for a user: its seq and verdict.
type outcomeOf struct {
	seq     int64
	verdict Verdict
}

// TestTheGateRule: Admit and Advance, case by case. A user starts at seq 0, leased under
// fence 7 (unless given back); each case records outcomes in order (each admitted as Next
// first, as the record does), then asks the gate about one seq for a lane holding fence.
func TestTheGateRule(t *testing.T) {
	t.Parallel()
	const held = 7
	for _, tc := range []struct {
		name      string
		recorded  []outcomeOf
		givenBack bool
		seq       int64
		fence     int64
		want      Admission
	}{
		{"in order: seq−1 recorded sent, seq is next", []outcomeOf{{1, Sent}}, false, 2, held, Next},
		{"in order: the first seq of a user", nil, false, 1, held, Next},
		{"gap: seq−1 never arrived", []outcomeOf{{1, Sent}}, false, 3, held, Waiting},
		{"gap: seq−1 waits for its retry", []outcomeOf{{1, Sent}, {2, Retry}}, false, 3, held, Waiting},
		{"gap: seq−1 held back by the breaker", []outcomeOf{{1, Postponed}}, false, 2, held, Waiting},
		{"dead-lettered predecessor: seq goes out", []outcomeOf{{1, DeadLettered}}, false, 2, held, Next},
		{"skipped: an operator skipped seq−1, seq goes out", []outcomeOf{{1, Sent}, {2, Skipped}}, false, 3, held, Next},
		{"skipped: seq−1 found finished already (advance)", []outcomeOf{{1, verdictAdvance}}, false, 2, held, Next},
		{"redelivered finished seq: sent", []outcomeOf{{1, Sent}, {2, Sent}}, false, 2, held, Finished},
		{"redelivered finished seq: dead-lettered", []outcomeOf{{1, DeadLettered}}, false, 1, 0, Finished},
		{"redelivered finished seq: a retried one is not finished", []outcomeOf{{1, Retry}}, false, 1, held, Next},
		{"stale fence: the user was claimed again", []outcomeOf{{1, Sent}}, false, 2, held - 1, Stale},
		{"stale fence: no claim holds the user", nil, true, 1, held, Stale},
		{"no claim: an arrival of the next seq is kept", []outcomeOf{{1, Sent}}, false, 2, 0, Next},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			at := Position{Fence: held, Leased: !tc.givenBack}
			for _, r := range tc.recorded {
				require.Equal(t, Next, Admit(at, r.seq, held), "recording %d %s", r.seq, r.verdict)
				at = Advance(at, r.seq, r.verdict)
			}
			require.Equal(t, tc.want, Admit(at, tc.seq, tc.fence))
		})
	}
}

// Advance moves a user only past its next seq, and only when the outcome finishes it.
func TestAdvance(t *testing.T) {
	t.Parallel()
	at := Position{LastSeq: 4, Fence: 2, Leased: true}
	require.Equal(t, Position{LastSeq: 5, Fence: 2, Leased: true}, Advance(at, 5, Sent))
	require.Equal(t, at, Advance(at, 5, Retry), "a retry does not finish it")
	require.Equal(t, at, Advance(at, 6, Sent), "past a gap: not its next")
	require.Equal(t, at, Advance(at, 4, Sent), "finished already")
}

// A user the gate has never seen starts at seq 1, so that an earlier seq arriving late is
// waited for and sent; only when its first arrival may set a baseline (the first batch of a
// queue the group's first start began at its end) does it start there, recorded as a
// baseline: the seqs before it count as finished and are never sent.
func TestWhereANewUserStarts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		first       int64 // the lowest seq of its first arrivals
		mayBaseline bool
		want        Position
		baseline    int64
		atFirst     Admission // Admit of seq first
		atOne       Admission // Admit of seq 1
	}{
		{"first seen at seq 1", 1, false, Position{}, 0, Next, Next},
		{"first seen at seq 5: seq 1 is waited for", 5, false, Position{}, 0, Waiting, Next},
		{"first seen at seq 5 where it may set a baseline", 5, true, Position{LastSeq: 4}, 5, Next, Finished},
		{"first seen at seq 1 where it may set a baseline: none", 1, true, Position{}, 0, Next, Next},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, baseline := start(c.first, c.mayBaseline)
			require.Equal(t, c.want, p)
			require.Equal(t, c.baseline, baseline)
			require.Equal(t, c.atFirst, Admit(p, c.first, 0))
			require.Equal(t, c.atOne, Admit(p, 1, 0))
		})
	}
}

// TestWhatAnEpochSays: Place and Rewind, case by case. The user stands at seq 6 of epoch 20,
// which began at its seq 4.
func TestWhatAnEpochSays(t *testing.T) {
	t.Parallel()
	at := Position{LastSeq: 6, Fence: 3, Epoch: 20, EpochSince: 4}
	for _, tc := range []struct {
		name       string
		epoch, seq int64
		want       History
	}{
		{"the current epoch", 20, 7, Same},
		{"the current epoch, a finished seq", 20, 5, Same},
		{"no epoch said (a body of the version before)", 0, 7, Same},
		{"an earlier epoch, before the current one began", 10, 3, Same},
		{"an earlier epoch, where the current one began", 10, 4, Superseded},
		{"an earlier epoch, past where the current one began", 10, 9, Superseded},
		{"a later epoch", 30, 5, Rewinds},
		{"a later epoch, past the user's position", 30, 9, Rewinds},
	} {
		require.Equal(t, tc.want, Place(at, tc.epoch, tc.seq), tc.name)
	}

	// A later epoch that began at seq 5: the user had finished seq 5 and 6 of the history
	// that was rewound; it stands before 5 in the new epoch.
	require.Equal(t, Position{LastSeq: 4, Fence: 3, Epoch: 30, EpochSince: 5}, Rewind(at, 30, 5))
	// One that began past the user's position (its seqs 7 and 8 are still to come, of the
	// history before it): the user stays where it is.
	require.Equal(t, Position{LastSeq: 6, Fence: 3, Epoch: 30, EpochSince: 9}, Rewind(at, 30, 9))
	// After a rewind, the events of the earlier epoch from its first seq on are superseded.
	require.Equal(t, Superseded, Place(Rewind(at, 30, 5), 20, 5))
	require.Equal(t, Same, Place(Rewind(at, 30, 5), 20, 4))
}
