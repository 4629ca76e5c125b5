package saga

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func remoteDone(context.Context, string, *Instance) Outcome { return Done() }

// uncertainDef mixes remote and local steps, with and without compensations.
func uncertainDef(t *testing.T) *Definition {
	t.Helper()
	d := Definition{
		Kind: "k",
		Steps: []Step{
			{Name: "charge", Do: Remote(remoteDone), Compensate: Remote(remoteDone)},
			{Name: "reserve", Do: Local(noop), Compensate: Local(noop)},
			{Name: "order", Do: Remote(remoteDone), Compensate: Remote(remoteDone)},
			{Name: "notify", Do: Remote(remoteDone)}, // nothing to undo
		},
		Window: time.Minute, BackoffBase: 10 * time.Millisecond, BackoffMax: 80 * time.Millisecond,
	}
	require.NoError(t, validate(&d))
	return &d
}

// A remote step that runs out of attempts has no definite outcome and is compensated
// itself, first; one that failed for good, or a local step, is not.
func TestDecideCompensatesAnUncertainRemoteStep(t *testing.T) {
	t.Parallel()
	boom := errors.New("response lost")
	fwd := func(step, attempts int) position {
		return position{State: Running, Step: step, Phase: phaseForward, Attempts: attempts}
	}
	comp := func(step int) position {
		return position{State: Compensating, Step: step, Phase: phaseCompensate}
	}
	exhausted := &ErrorInfo{Code: CodeAttemptsExhausted, Message: "gave up after 3 attempts over 1m0s: response lost"}
	tests := []struct {
		name    string
		at      position
		o       Outcome
		to      position
		err     *ErrorInfo
		records []string
	}{
		{"first remote step exhausted compensates itself", fwd(0, 2), Retry(boom), comp(0), exhausted,
			[]string{"charge/forward/failed"}},
		{"first remote step failed for good fails", fwd(0, 2), Fail("declined", boom),
			position{State: Failed, Phase: phaseForward, Attempts: 3},
			&ErrorInfo{Code: "declined", Message: "response lost"}, []string{"charge/forward/failed"}},
		{"later remote step exhausted compensates itself", fwd(2, 2), Retry(boom), comp(2), exhausted,
			[]string{"order/forward/failed"}},
		{"timeouts count as uncertain", fwd(2, 2), Outcome{Kind: OutcomeRetry, Code: "timeout", Err: boom}, comp(2),
			&ErrorInfo{Code: "timeout", Message: "gave up after 3 attempts over 1m0s: response lost"}, []string{"order/forward/failed"}},
		{"later remote step failed for good compensates the earlier ones", fwd(2, 0), Fail("rejected", boom), comp(1),
			&ErrorInfo{Code: "rejected", Message: "response lost"}, []string{"order/forward/failed"}},
		{"uncertain remote step with nothing to undo compensates the earlier ones", fwd(3, 2), Retry(boom), comp(2), exhausted,
			[]string{"notify/forward/failed"}},
		{"exhausted local step never committed", fwd(1, 2), Retry(boom), comp(0), exhausted,
			[]string{"reserve/forward/failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			at := tt.at
			at.Attempts = 3
			tr := decide(uncertainDef(t), at, tt.o, time.Minute, nil, fixed)
			require.Equal(t, tt.to, tr.To)
			require.Equal(t, tt.err, tr.Err)
			var got []string
			for _, r := range tr.Records {
				got = append(got, r.Name+"/"+r.Phase+"/"+r.Status)
			}
			require.Equal(t, tt.records, got)
		})
	}
}
