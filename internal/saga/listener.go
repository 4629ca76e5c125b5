package saga

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// The listener's reconnect backoff: doubling from the first to the second, reset by a
// successful LISTEN.
const (
	reconnectMin = 100 * time.Millisecond
	reconnectMax = 5 * time.Second
)

// listener is an engine's one connection LISTENing saga_due and saga_done. It wakes the
// dispatcher on saga_due and the waiters of a saga on its saga_done; a periodic re-check
// (every PollInterval) of the waiters' sagas wakes those whose notification was lost (sent
// while the connection was down). It runs while it has users (Run, and each Wait in
// progress) and stops when the last one leaves.
type listener struct {
	e *Engine

	mu      sync.Mutex
	users   int
	cancel  context.CancelFunc // stops the running session
	stopped chan struct{}      // closed when the latest session has ended
	waiters map[int64][]chan struct{}

	recheck chan struct{} // asks for a re-check now; capacity 1
}

func newListener(e *Engine) *listener {
	return &listener{e: e, waiters: map[int64][]chan struct{}{}, recheck: make(chan struct{}, 1)}
}

// acquire adds a user, starting a session if there was none.
func (l *listener) acquire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.users++
	if l.users > 1 {
		return
	}
	prev := l.stopped
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	l.cancel, l.stopped = cancel, stopped
	go func() {
		defer close(stopped)
		if prev != nil {
			<-prev // one connection at a time: let the previous session close its own
		}
		l.session(ctx)
	}()
}

// release removes a user. When it was the last, the session is told to stop and release
// returns a channel closed once it has; otherwise nil.
func (l *listener) release() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.users--
	if l.users > 0 {
		return nil
	}
	l.cancel()
	return l.stopped
}

// subscribe registers a waiter for saga id: the returned channel receives (without
// blocking the sender; it holds one wake-up) whenever the saga may have ended. unsubscribe
// must be called once the waiter is done.
func (l *listener) subscribe(id int64) (wake <-chan struct{}, unsubscribe func()) {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	l.waiters[id] = append(l.waiters[id], ch)
	l.mu.Unlock()
	l.acquire()
	return ch, func() {
		l.mu.Lock()
		chans := l.waiters[id]
		for i, c := range chans {
			if c == ch {
				chans = append(chans[:i:i], chans[i+1:]...)
				break
			}
		}
		if len(chans) == 0 {
			delete(l.waiters, id)
		} else {
			l.waiters[id] = chans
		}
		l.mu.Unlock()
		l.release() // a Wait does not wait for the session to close its connection
	}
}

// wake wakes the waiters of saga id.
func (l *listener) wake(id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ch := range l.waiters[id] {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// waited returns the ids of the sagas someone is waiting for.
func (l *listener) waited() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]int64, 0, len(l.waiters))
	for id := range l.waiters {
		ids = append(ids, id)
	}
	return ids
}

func (l *listener) askRecheck() {
	select {
	case l.recheck <- struct{}{}:
	default:
	}
}

// session listens, reconnecting with backoff, and re-checks the waiters' sagas, until ctx
// is done.
func (l *listener) session(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { l.recheckLoop(ctx) })

	delay := reconnectMin
	for {
		listened, err := l.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if listened {
			delay = reconnectMin
		}
		l.e.log.Warn("saga: listener lost; reconnecting (polling meanwhile)", "err", err, "in", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, reconnectMax)
	}
}

// listenOnce opens the connection, listens, and hands out notifications until the
// connection fails or ctx is done. It reports whether it got as far as listening.
func (l *listener) listenOnce(ctx context.Context) (bool, error) {
	conn, err := listen(ctx, l.e.pool)
	if err != nil {
		return false, err
	}
	defer closeConn(ctx, conn)
	// Notifications sent while no one listened are lost: look again at what may have
	// become due or ended meanwhile.
	l.e.signal()
	l.askRecheck()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		switch n.Channel {
		case channelDue:
			l.e.signal()
		case channelDone:
			if id, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
				l.wake(id)
			}
		}
	}
}

// recheckLoop wakes, every PollInterval or when asked, the waiters whose saga has ended.
func (l *listener) recheckLoop(ctx context.Context) {
	t := time.NewTicker(l.e.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-l.recheck:
		}
		ids := l.waited()
		if len(ids) == 0 {
			continue
		}
		ended, err := endedSagas(ctx, l.e.pool, ids)
		if err != nil {
			if ctx.Err() == nil {
				l.e.log.Warn("saga: re-check of waited sagas failed", "err", err)
			}
			continue
		}
		for _, id := range ended {
			l.wake(id)
		}
	}
}
