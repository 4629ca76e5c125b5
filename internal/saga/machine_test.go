package saga

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func noop(context.Context, pgx.Tx, *Instance) Outcome { return Done() }

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
		MaxAttempts: 3, BackoffBase: 10 * time.Millisecond, BackoffMax: 80 * time.Millisecond,
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
		o       Outcome
		cur     *ErrorInfo
		to      position
		err     *ErrorInfo
		records []string // step/phase/status
	}{
		{"done moves on", fwd(1, 0), 1, Done(), nil, fwd(2, 0), nil, []string{"b/forward/done"}},
		{"last done completes", fwd(3, 0), 1, Done(), nil, position{State: Completed, Step: 3, Phase: phaseForward, Attempts: 1}, nil, []string{"d/forward/done"}},
		{"retry stays", fwd(2, 0), 1, Retry(boom), nil, fwd(2, 1), nil, []string{"c/forward/pending"}},
		{"retry exhausted fails and compensates, skipping b", fwd(2, 2), 3, Retry(boom), nil, comp(0),
			&ErrorInfo{Code: CodeAttemptsExhausted, Message: "gave up after 3 attempts: boom"},
			[]string{"c/forward/failed", "b/compensate/skipped"}},
		{"exhausted keeps the outcome's code", fwd(2, 2), 3, Outcome{Kind: OutcomeRetry, Code: "timeout", Err: boom}, nil, comp(0),
			&ErrorInfo{Code: "timeout", Message: "gave up after 3 attempts: boom"},
			[]string{"c/forward/failed", "b/compensate/skipped"}},
		{"fail on first step", fwd(0, 0), 1, Fail("insufficient_funds", boom), nil,
			position{State: Failed, Phase: phaseForward, Attempts: 1},
			&ErrorInfo{Code: "insufficient_funds", Message: "boom"}, []string{"a/forward/failed"}},
		{"fail later compensates", fwd(3, 0), 1, Fail("declined", boom), nil, comp(2),
			&ErrorInfo{Code: "declined", Message: "boom"}, []string{"d/forward/failed"}},
		{"zero outcome is no success", fwd(0, 0), 1, Outcome{}, nil, position{State: Failed, Phase: phaseForward, Attempts: 1},
			&ErrorInfo{Code: "invalid_outcome", Message: "step returned outcome kind 0"}, []string{"a/forward/failed"}},
		{"compensation done goes back, skipping", comp(2), 1, Done(), orig, comp(0), nil,
			[]string{"c/compensate/done", "b/compensate/skipped"}},
		{"last compensation done", comp(0), 1, Done(), orig, position{State: Compensated, Phase: phaseCompensate}, nil,
			[]string{"a/compensate/done"}},
		{"compensation fails", comp(0), 1, Fail("gone", boom), orig,
			position{State: NeedsAttention, Phase: phaseCompensate, Attempts: 1},
			&ErrorInfo{Code: CodeCompensationFailed, Message: `compensation of step "a" failed (gone: boom) while undoing a saga that failed with declined: card declined`},
			[]string{"a/compensate/failed"}},
		{"compensation exhausted", comp(2), 3, Retry(boom), orig,
			position{State: NeedsAttention, Step: 2, Phase: phaseCompensate, Attempts: 3},
			&ErrorInfo{Code: CodeCompensationFailed, Message: `compensation of step "c" failed (attempts_exhausted: gave up after 3 attempts: boom) while undoing a saga that failed with declined: card declined`},
			[]string{"c/compensate/failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := decide(testDef(t), tt.at, tt.attempt, tt.o, tt.cur, fixed)
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
	tr := decide(d, at, 1, RetryAfter(nil, time.Hour), nil, fixed)
	require.Equal(t, time.Hour, tr.Delay)

	tr = decide(d, position{State: Running, Step: 9, Phase: phaseForward}, 1, Done(), nil, fixed)
	require.Equal(t, NeedsAttention, tr.To.State)
	require.Equal(t, "unknown_step", tr.Err.Code)
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	d := testDef(t) // 10ms .. 80ms
	lowest := func(int64) int64 { return 0 }
	var prev time.Duration
	for attempt := 1; attempt <= 10; attempt++ {
		hi, lo := backoff(d, attempt, fixed), backoff(d, attempt, lowest)
		require.GreaterOrEqual(t, lo, d.BackoffBase)
		require.LessOrEqual(t, hi, d.BackoffMax)
		require.LessOrEqual(t, lo, hi)
		require.GreaterOrEqual(t, hi, prev, "grows with the attempts")
		prev = hi
	}
	require.Equal(t, 80*time.Millisecond, backoff(d, 4, fixed))
	require.Equal(t, 40*time.Millisecond, backoff(d, 4, lowest))

	huge := Definition{BackoffBase: time.Second, BackoffMax: time.Duration(1<<63 - 1)}
	require.Positive(t, backoff(&huge, 200, fixed), "no overflow")
}

func TestDecideSkipsAMissingCompensation(t *testing.T) {
	t.Parallel()
	tr := decide(testDef(t), position{State: Compensating, Step: 1, Phase: phaseCompensate}, 0, Done(), nil, fixed)
	require.Equal(t, position{State: Compensating, Step: 0, Phase: phaseCompensate}, tr.To)
	require.Equal(t, []stepWrite{{Step: 1, Name: "b", Phase: phaseCompensate, Status: statusSkipped}}, tr.Records)
}
