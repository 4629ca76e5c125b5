// Package lifecycle is the one shape of the processes' background work: a Service is started
// with Start(ctx) and stopped with Stop(ctx), Stop returning once its goroutines have exited;
// a Runner gives that shape to a loop, with Started and Stopped signals to wait on; a Group
// starts services in order and stops them in reverse.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Service is background work. Start begins it and returns without waiting for it to end;
// the work keeps ctx's values but not its cancellation (only Stop ends it), so a process
// can cancel its signal context and still stop its services in order. Stop ends the work
// and returns once its goroutines have exited, with the error the work ended on; if ctx
// ends first, Stop returns ctx's error and the work goes on ending on its own.
type Service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// ErrStarted is Start's error for a service started (or stopped) before: a service runs
// once.
var ErrStarted = errors.New("lifecycle: already started or stopped")

// Runner is a Service that runs one function in a goroutine: Start calls it with a context
// that Stop cancels. Components embed a *Runner made over their loop to take its Start,
// Stop, Started and Stopped.
type Runner struct {
	run func(ctx context.Context) error

	mu      sync.Mutex
	state   runnerState
	cancel  context.CancelFunc
	err     error
	started chan struct{}
	stopped chan struct{}
}

type runnerState int

const (
	runnerNew runnerState = iota
	runnerStarted
	runnerStopped
)

// NewRunner returns a runner of run. run must return soon after its context is cancelled.
func NewRunner(run func(ctx context.Context) error) *Runner {
	return &Runner{run: run, started: make(chan struct{}), stopped: make(chan struct{})}
}

// Start runs the function in a goroutine and returns; it fails with ErrStarted on a second
// call, or after Stop.
func (r *Runner) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != runnerNew {
		return ErrStarted
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.state, r.cancel = runnerStarted, cancel
	go func() {
		defer close(r.stopped)
		err := r.run(rctx)
		cancel()
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
	}()
	close(r.started)
	return nil
}

// Stop cancels the function's context and waits until it returns, or ctx ends. It returns
// the function's error, or ctx's when the function did not return in time. A runner never
// started is stopped at once (and cannot start after).
func (r *Runner) Stop(ctx context.Context) error {
	r.mu.Lock()
	switch r.state {
	case runnerNew:
		r.state = runnerStopped
		close(r.stopped)
	case runnerStarted:
		r.cancel()
	}
	r.mu.Unlock()
	select {
	case <-r.stopped:
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("lifecycle: still stopping: %w", ctx.Err())
	}
}

// Started is closed once Start has set the function going.
func (r *Runner) Started() <-chan struct{} { return r.started }

// Stopped is closed once the function has returned, after Stop or on its own (a Stop that
// comes first closes it too).
func (r *Runner) Stopped() <-chan struct{} { return r.stopped }

// Group starts services in the order they were added and stops them in reverse: what is
// started first (what the others feed) is stopped last. It is itself a Service.
type Group struct {
	members []member
	started int
	ran     bool
}

type member struct {
	name string
	svc  Service
}

// Add appends a service; name says which it is in errors.
func (g *Group) Add(name string, s Service) {
	g.members = append(g.members, member{name: name, svc: s})
}

// Start starts the services in order. When one fails, it stops those already started, in
// reverse, and returns the failure (with theirs).
func (g *Group) Start(ctx context.Context) error {
	if g.ran {
		return ErrStarted
	}
	g.ran = true
	for _, m := range g.members {
		if err := m.svc.Start(ctx); err != nil {
			return errors.Join(fmt.Errorf("start %s: %w", m.name, err), g.Stop(context.WithoutCancel(ctx)))
		}
		g.started++
	}
	return nil
}

// Stop stops the started services in reverse order, each after the one before it has
// stopped, and returns their errors joined; one that fails does not keep the rest running.
// ctx bounds the whole stop.
func (g *Group) Stop(ctx context.Context) error {
	var errs []error
	for ; g.started > 0; g.started-- {
		m := g.members[g.started-1]
		if err := m.svc.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", m.name, err))
		}
	}
	return errors.Join(errs...)
}

// Run is a process's life: it starts g, waits until ctx ends (a signal) or done is closed
// (e.g. a server's Stopped: it failed on its own), then stops g in reverse within timeout.
// It returns the errors of the start or of the stop.
func Run(ctx context.Context, g *Group, done <-chan struct{}, timeout time.Duration) error {
	if err := g.Start(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-done:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	return g.Stop(sctx)
}
