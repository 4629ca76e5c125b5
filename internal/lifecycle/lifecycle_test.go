package lifecycle_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/walletsaga/walletsaga/internal/lifecycle"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type ctxKey struct{}

func TestRunner(t *testing.T) {
	t.Parallel()
	errLoop := errors.New("loop failed")
	untilCancelled := func(ctx context.Context) error { <-ctx.Done(); return nil }
	tests := []struct {
		name string
		run  func(ctx context.Context) error
		// act drives the runner and returns Stop's error.
		act     func(t *testing.T, r *lifecycle.Runner) error
		wantErr error
	}{
		{name: "stop ends the loop", run: untilCancelled, act: func(t *testing.T, r *lifecycle.Runner) error {
			require.NoError(t, r.Start(t.Context()))
			<-r.Started()
			return r.Stop(t.Context())
		}},
		{name: "stop returns the loop's error", run: func(ctx context.Context) error { <-ctx.Done(); return errLoop },
			act: func(t *testing.T, r *lifecycle.Runner) error {
				require.NoError(t, r.Start(t.Context()))
				return r.Stop(t.Context())
			}, wantErr: errLoop},
		{name: "a loop that ends on its own closes Stopped", run: func(context.Context) error { return errLoop },
			act: func(t *testing.T, r *lifecycle.Runner) error {
				require.NoError(t, r.Start(t.Context()))
				<-r.Stopped()
				return r.Stop(t.Context())
			}, wantErr: errLoop},
		{name: "cancelling start's context does not stop the loop", run: func(ctx context.Context) error {
			seen := ctx.Value(ctxKey{}).(chan error)
			if err := <-seen; err != nil { // start's context is cancelled
				return err
			}
			seen <- ctx.Err() // and the loop's is not
			<-ctx.Done()
			return nil
		}, act: func(t *testing.T, r *lifecycle.Runner) error {
			seen := make(chan error)
			ctx, cancel := context.WithCancel(context.WithValue(t.Context(), ctxKey{}, seen))
			require.NoError(t, r.Start(ctx))
			cancel()
			seen <- nil
			require.NoError(t, <-seen, "the loop's context ended with start's")
			return r.Stop(t.Context())
		}},
		{name: "the loop sees start's values", run: func(ctx context.Context) error {
			if ctx.Value(ctxKey{}) != "v" {
				return errors.New("value lost")
			}
			<-ctx.Done()
			return nil
		}, act: func(t *testing.T, r *lifecycle.Runner) error {
			require.NoError(t, r.Start(context.WithValue(t.Context(), ctxKey{}, "v")))
			return r.Stop(t.Context())
		}},
		{name: "a second start fails", run: untilCancelled, act: func(t *testing.T, r *lifecycle.Runner) error {
			require.NoError(t, r.Start(t.Context()))
			require.ErrorIs(t, r.Start(t.Context()), lifecycle.ErrStarted)
			return r.Stop(t.Context())
		}},
		{name: "stop before start stops at once and forbids a start", run: untilCancelled,
			act: func(t *testing.T, r *lifecycle.Runner) error {
				require.NoError(t, r.Stop(t.Context()))
				<-r.Stopped()
				require.ErrorIs(t, r.Start(t.Context()), lifecycle.ErrStarted)
				return nil
			}},
		{name: "stop is bounded by its context", run: func(ctx context.Context) error {
			<-ctx.Done()
			<-ctx.Value(ctxKey{}).(chan struct{}) // a drain that outlasts the stop's wait
			return nil
		}, act: func(t *testing.T, r *lifecycle.Runner) error {
			drained := make(chan struct{})
			require.NoError(t, r.Start(context.WithValue(t.Context(), ctxKey{}, drained)))
			ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
			defer cancel()
			err := r.Stop(ctx)
			close(drained)
			<-r.Stopped() // the drain goes on and ends
			return err
		}, wantErr: context.DeadlineExceeded},
		{name: "stop twice returns the same", run: func(ctx context.Context) error { <-ctx.Done(); return errLoop },
			act: func(t *testing.T, r *lifecycle.Runner) error {
				require.NoError(t, r.Start(t.Context()))
				require.ErrorIs(t, r.Stop(t.Context()), errLoop)
				return r.Stop(t.Context())
			}, wantErr: errLoop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.act(t, lifecycle.NewRunner(tt.run))
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
		})
	}
}

// recorder is a service that logs its starts and stops.
type recorder struct {
	name             string
	log              *journal
	startErr, stopEr error
}

type journal struct {
	mu    sync.Mutex
	lines []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines = append(j.lines, s)
}

func (r recorder) Start(context.Context) error {
	r.log.add("start " + r.name)
	return r.startErr
}

func (r recorder) Stop(context.Context) error {
	r.log.add("stop " + r.name)
	return r.stopEr
}

func TestGroup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// failStart and failStop name the member whose Start or Stop fails.
		failStart, failStop string
		want                string
		wantStartErr        string
		wantStopErr         string
	}{
		{name: "start in order, stop in reverse",
			want: "start a, start b, start c, stop c, stop b, stop a"},
		{name: "a failed start stops those started, in reverse", failStart: "c",
			want: "start a, start b, start c, stop b, stop a", wantStartErr: "start c: boom"},
		{name: "the first failing start stops nothing", failStart: "a",
			want: "start a", wantStartErr: "start a: boom"},
		{name: "a failed stop does not keep the rest running", failStop: "b",
			want: "start a, start b, start c, stop c, stop b, stop a", wantStopErr: "stop b: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := &journal{}
			var g lifecycle.Group
			for _, n := range []string{"a", "b", "c"} {
				r := recorder{name: n, log: j}
				if n == tt.failStart {
					r.startErr = errors.New("boom")
				}
				if n == tt.failStop {
					r.stopEr = errors.New("boom")
				}
				g.Add(n, r)
			}
			err := g.Start(t.Context())
			if tt.wantStartErr != "" {
				require.EqualError(t, err, tt.wantStartErr)
			} else {
				require.NoError(t, err)
				err = g.Stop(t.Context())
				if tt.wantStopErr != "" {
					require.EqualError(t, err, tt.wantStopErr)
				} else {
					require.NoError(t, err)
				}
			}
			require.Equal(t, tt.want, strings.Join(j.lines, ", "))
			require.ErrorIs(t, g.Start(t.Context()), lifecycle.ErrStarted, "a group runs once")
			require.NoError(t, g.Stop(t.Context()), "a second stop has nothing left to stop")
		})
	}
}

// TestGroupStopsEachAfterTheOneBefore checks that a member's Stop begins only once the one
// started after it has returned, so that what feeds a member has stopped before it drains.
func TestGroupStopsEachAfterTheOneBefore(t *testing.T) {
	t.Parallel()
	var g lifecycle.Group
	feeder := lifecycle.NewRunner(func(ctx context.Context) error { <-ctx.Done(); return nil })
	var order []string
	drain := lifecycle.NewRunner(func(ctx context.Context) error {
		<-ctx.Done()
		select {
		case <-feeder.Stopped():
			order = append(order, "drained after the feeder stopped")
		default:
			order = append(order, "drained while the feeder ran")
		}
		return nil
	})
	g.Add("drain", drain)
	g.Add("feeder", feeder)
	require.NoError(t, g.Start(t.Context()))
	<-feeder.Started()
	require.NoError(t, g.Stop(t.Context()))
	require.Equal(t, []string{"drained after the feeder stopped"}, order)
}

func TestRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// end ends the run: it cancels ctx or closes done.
		end  func(cancel context.CancelFunc, done chan struct{})
		want string
	}{
		{name: "a signal stops the group", end: func(cancel context.CancelFunc, _ chan struct{}) { cancel() },
			want: "start a, start b, stop b, stop a"},
		{name: "a service that ends stops the group", end: func(_ context.CancelFunc, done chan struct{}) { close(done) },
			want: "start a, start b, stop b, stop a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := &journal{}
			var g lifecycle.Group
			g.Add("a", recorder{name: "a", log: j})
			g.Add("b", recorder{name: "b", log: j})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan struct{})
			tt.end(cancel, done)
			require.NoError(t, lifecycle.Run(ctx, &g, done, time.Second))
			require.Equal(t, tt.want, strings.Join(j.lines, ", "))
		})
	}
}

func TestRunReturnsAFailedStart(t *testing.T) {
	t.Parallel()
	j := &journal{}
	var g lifecycle.Group
	g.Add("a", recorder{name: "a", log: j})
	g.Add("b", recorder{name: "b", log: j, startErr: errors.New("boom")})
	require.EqualError(t, lifecycle.Run(t.Context(), &g, nil, time.Second), "start b: boom")
	require.Equal(t, "start a, start b, stop a", strings.Join(j.lines, ", "))
}
