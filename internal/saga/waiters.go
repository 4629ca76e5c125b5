package saga

import (
	"context"
	"sync"
	"time"
)

// waiters are the Waits in progress on an engine. A runner of the engine that ends a saga
// wakes its waiters at once; sagas ended elsewhere (another replica) are found by a re-check
// of every waited saga, in one query each PollInterval, that runs while anyone waits.
type waiters struct {
	e *Engine

	mu      sync.Mutex
	by      map[int64][]chan struct{}
	cancel  context.CancelFunc // stops the running re-check loop
	stopped chan struct{}      // closed when the latest re-check loop has ended
}

func newWaiters(e *Engine) *waiters {
	return &waiters{e: e, by: map[int64][]chan struct{}{}}
}

// subscribe registers a waiter for saga id: the returned channel receives (without blocking
// the sender; it holds one wake-up) whenever the saga may have ended. unsubscribe must be
// called once the waiter is done.
func (w *waiters) subscribe(id int64) (wake <-chan struct{}, unsubscribe func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	w.by[id] = append(w.by[id], ch)
	if w.cancel == nil {
		prev := w.stopped
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		w.cancel, w.stopped = cancel, stopped
		go func() {
			defer close(stopped)
			if prev != nil {
				<-prev
			}
			w.recheck(ctx)
		}()
	}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		chans := w.by[id]
		for i, c := range chans {
			if c == ch {
				chans = append(chans[:i:i], chans[i+1:]...)
				break
			}
		}
		if len(chans) == 0 {
			delete(w.by, id)
		} else {
			w.by[id] = chans
		}
		if len(w.by) == 0 && w.cancel != nil {
			w.cancel()
			w.cancel = nil
		}
	}
}

// wake wakes the waiters of saga id.
func (w *waiters) wake(id int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.by[id] {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

func (w *waiters) waited() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]int64, 0, len(w.by))
	for id := range w.by {
		ids = append(ids, id)
	}
	return ids
}

// recheck wakes, every PollInterval, the waiters whose saga has ended, until ctx is done.
func (w *waiters) recheck(ctx context.Context) {
	t := time.NewTicker(w.e.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ids := w.waited()
		if len(ids) == 0 {
			continue
		}
		ended, err := endedSagas(ctx, w.e.pool, ids)
		if err != nil {
			if ctx.Err() == nil {
				w.e.log.Warn("saga: re-check of waited sagas failed", "err", err)
			}
			continue
		}
		for _, id := range ended {
			w.wake(id)
		}
	}
}
