package saga

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func noop(*Instance, *pgx.Batch) Outcome { return Done() }

func testDef(t *testing.T) *Definition {
	t.Helper()
	d := Definition{
		Kind: "k",
		Steps: []Step{
			{Name: "a", Do: Local(noop), Compensate: Local(noop)},
			{Name: "b", Do: Local(noop)}, // nothing to undo
			{Name: "c", Do: Local(noop), Compensate: Local(noop)},
			{Name: "d", Do: Local(noop)},
		},
		Window: time.Minute, BackoffBase: 10 * time.Millisecond, BackoffMax: 80 * time.Millisecond,
	}
	require.NoError(t, validate(&d))
	return &d
}

func fixed(n int64) int64 { return n - 1 } // the largest jitter

func TestDecide(t *testing.T) {
	t.Parallel()
	orig := &ErrorInfo{Code: "declined", Message: "card declined"}
	boom := errors.New("boom")
	fwd := func(step, attempts int) position {
		return position{State: Running, Step: step, Phase: phaseForward, Attempts: attempts}
	}
	comp := func(step int) position {
		return position{State: Compensating, Step: step, Phase: phaseCompensate}
	}
	tests := []struct {
		name    string
		at      position
		attempt int
		elapsed time.Duration
		o       Outcome
		cur     *ErrorInfo
		to      position
		err     *ErrorInfo
		records []string // step/phase/status
	}{
		{"done moves on", fwd(1, 0), 1, 0, Done(), nil, fwd(2, 0), nil, []string{"b/forward/done"}},
		{"last done completes", fwd(3, 0), 1, 0, Done(), nil, position{State: Completed, Step: 3, Phase: phaseForward, Attempts: 1}, nil, []string{"d/forward/done"}},
		{"retry stays", fwd(2, 0), 1, time.Second, Retry(boom), nil, fwd(2, 1), nil, []string{"c/forward/pending"}},
		{"retry exhausted fails and compensates, skipping b", fwd(2, 2), 3, time.Minute, Retry(boom), nil, comp(0),
			&ErrorInfo{Code: CodeAttemptsExhausted, Message: "gave up after 3 attempts over 1m0s: boom"},
			[]string{"c/forward/failed", "b/compensate/skipped"}},
		{"exhausted keeps the outcome's code", fwd(2, 2), 3, 2 * time.Minute, Outcome{Kind: OutcomeRetry, Code: "timeout", Err: boom}, nil, comp(0),
			&ErrorInfo{Code: "timeout", Message: "gave up after 3 attempts over 2m0s: boom"},
			[]string{"c/forward/failed", "b/compensate/skipped"}},
		{"fail on first step", fwd(0, 0), 1, 0, Fail("insufficient_funds", boom), nil,
			position{State: Failed, Phase: phaseForward, Attempts: 1},
			&ErrorInfo{Code: "insufficient_funds", Message: "boom"}, []string{"a/forward/failed"}},
		{"fail later compensates", fwd(3, 0), 1, 0, Fail("declined", boom), nil, comp(2),
			&ErrorInfo{Code: "declined", Message: "boom"}, []string{"d/forward/failed"}},
		{"zero outcome is no success", fwd(0, 0), 1, 0, Outcome{}, nil, position{State: Failed, Phase: phaseForward, Attempts: 1},
			&ErrorInfo{Code: "invalid_outcome", Message: "step returned outcome kind 0"}, []string{"a/forward/failed"}},
		{"compensation done goes back, skipping", comp(2), 1, 0, Done(), orig, comp(0), nil,
			[]string{"c/compensate/done", "b/compensate/skipped"}},
		{"last compensation done", comp(0), 1, 0, Done(), orig, position{State: Compensated, Phase: phaseCompensate}, nil,
			[]string{"a/compensate/done"}},
		{"compensation fails", comp(0), 1, 0, Fail("gone", boom), orig,
			position{State: NeedsAttention, Phase: phaseCompensate, Attempts: 1},
			&ErrorInfo{Code: CodeCompensationFailed, Message: `compensation of step "a" failed (gone: boom) while undoing a saga that failed with declined: card declined`},
			[]string{"a/compensate/failed"}},
		{"compensation exhausted", comp(2), 3, time.Hour, Retry(boom), orig,
			position{State: NeedsAttention, Step: 2, Phase: phaseCompensate, Attempts: 3},
			&ErrorInfo{Code: CodeCompensationFailed, Message: `compensation of step "c" failed (attempts_exhausted: gave up after 3 attempts over 1h0m0s: boom) while undoing a saga that failed with declined: card declined`},
			[]string{"c/compensate/failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			at := tt.at
			at.Attempts = tt.attempt
			tr := decide(testDef(t), at, tt.o, tt.elapsed, tt.cur, fixed)
			require.Equal(t, tt.to, tr.To)
			require.Equal(t, tt.err, tr.Err)
			var got []string
			for _, r := range tr.Records {
				got = append(got, r.Name+"/"+r.Phase+"/"+r.Status)
			}
			require.Equal(t, tt.records, got)
			if tt.o.Kind == OutcomeRetry && tr.To.State == tt.at.State {
				require.Positive(t, tr.Delay)
			} else {
				require.Zero(t, tr.Delay)
			}
		})
	}
}

func TestDecideRetryAfterAndUnknownStep(t *testing.T) {
	t.Parallel()
	d := testDef(t)
	at := position{State: Running, Step: 1, Phase: phaseForward}
	tr := decide(d, at, RetryAfter(nil, time.Hour), 0, nil, fixed)
	require.Equal(t, time.Hour, tr.Delay)

	tr = decide(d, position{State: Running, Step: 9, Phase: phaseForward}, Done(), 0, nil, fixed)
	require.Equal(t, NeedsAttention, tr.To.State)
	require.Equal(t, "unknown_step", tr.Err.Code)
}

func TestDecideBacksOffWithThePolicy(t *testing.T) {
	t.Parallel()
	d := testDef(t) // 10ms .. 80ms
	at := position{State: Running, Step: 1, Phase: phaseForward}
	for attempt, want := range map[int]time.Duration{1: 10 * time.Millisecond, 2: 20 * time.Millisecond, 4: 80 * time.Millisecond, 9: 80 * time.Millisecond} {
		at.Attempts = attempt
		require.Equal(t, want, decide(d, at, Retry(nil), 0, nil, fixed).Delay, "attempt %d", attempt)
	}
}

func TestDecideSkipsAMissingCompensation(t *testing.T) {
	t.Parallel()
	tr := decide(testDef(t), position{State: Compensating, Step: 1, Phase: phaseCompensate}, Done(), 0, nil, fixed)
	require.Equal(t, position{State: Compensating, Step: 0, Phase: phaseCompensate}, tr.To)
	require.Equal(t, []stepWrite{{Step: 1, Name: "b", Phase: phaseCompensate, Status: statusSkipped}}, tr.Records)
}

// fold plans one commit: a remote outcome, then every local action after it up to the next
// remote one (counted) or the end; known outcomes of local actions replace the assumption
// that they succeed.
func TestFold(t *testing.T) {
	t.Parallel()
	d := Definition{
		Kind: "k",
		Steps: []Step{
			{Name: "debit", Do: Local(noop), Compensate: Local(noop)},
			{Name: "order", Do: Remote(remoteDone), Compensate: Remote(remoteDone)},
			{Name: "credit", Do: Local(noop)},
			{Name: "confirm", Do: Local(noop)},
		},
		Window: time.Minute, BackoffBase: 10 * time.Millisecond, BackoffMax: 80 * time.Millisecond,
	}
	require.NoError(t, validate(&d))
	recs := func(f folded) []string {
		var out []string
		for _, r := range f.Records {
			out = append(out, fmt.Sprintf("%s/%s/%s/%d", r.Name, r.Phase, r.Status, r.Attempts))
		}
		return out
	}
	start := position{State: Running, Step: 0, Phase: phaseForward, Attempts: 1}
	order := position{State: Running, Step: 1, Phase: phaseForward, Attempts: 1}

	// The start commit runs the debit and counts the order's first attempt.
	f := fold(&d, start, nil, nil, 0, nil, fixed)
	require.Equal(t, position{State: Running, Step: 1, Phase: phaseForward, Attempts: 1}, f.To)
	require.Equal(t, []position{start}, f.Locals)
	require.Equal(t, []string{"debit/forward/done/1", "order/forward/pending/1"}, recs(f))
	require.True(t, f.continues())

	// Insufficient funds learnt from the failed statement: failed at once, nothing queued.
	f = fold(&d, start, nil, map[position]Outcome{start: Fail("insufficient_funds", errors.New("no"))}, 0, nil, fixed)
	require.Equal(t, Failed, f.To.State)
	require.Empty(t, f.Locals)
	require.Equal(t, "insufficient_funds", f.Err.Code)

	// The order placed: credit and confirm run in the same commit, and the saga completes.
	done := Done()
	f = fold(&d, order, &done, nil, time.Second, nil, fixed)
	require.Equal(t, Completed, f.To.State)
	require.Len(t, f.Locals, 2)
	require.Equal(t, []string{"order/forward/done/1", "credit/forward/done/1", "confirm/forward/done/1"}, recs(f))

	// The order rejected: the debit's compensation runs in the same commit.
	rejected := Fail("rejected", errors.New("no"))
	f = fold(&d, order, &rejected, nil, 0, nil, fixed)
	require.Equal(t, Compensated, f.To.State)
	require.Equal(t, []position{{State: Compensating, Step: 0, Phase: phaseCompensate, Attempts: 1}}, f.Locals)
	require.Equal(t, &ErrorInfo{Code: "rejected", Message: "no"}, f.Err)
	require.Equal(t, []string{"order/forward/failed/1", "debit/compensate/done/1"}, recs(f))

	// No answer, window left: a backoff at the same step, nothing else.
	lost := Retry(errors.New("lost"))
	f = fold(&d, order, &lost, nil, time.Second, nil, fixed)
	require.Equal(t, order, f.To)
	require.Equal(t, 10*time.Millisecond, f.Delay)
	require.False(t, f.NewPosition)
	require.Empty(t, f.Locals)

	// Window exhausted: the order's own compensation is remote; its first attempt is counted.
	f = fold(&d, order, &lost, nil, time.Minute, nil, fixed)
	require.Equal(t, position{State: Compensating, Step: 1, Phase: phaseCompensate, Attempts: 1}, f.To)
	require.True(t, f.NewPosition)
	require.Equal(t, []string{"order/forward/failed/1", "order/compensate/pending/1"}, recs(f))

	// A saga that starts with a remote step: only the count.
	r := Definition{Kind: "r", Steps: []Step{{Name: "charge", Do: Remote(remoteDone)}, {Name: "credit", Do: Local(noop)}}}
	require.NoError(t, validate(&r))
	f = fold(&r, start, nil, nil, 0, nil, fixed)
	require.Equal(t, start, f.To)
	require.Empty(t, f.Locals)
	require.Equal(t, []string{"charge/forward/pending/1"}, recs(f))
}
