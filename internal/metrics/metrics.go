// Package metrics is the Prometheus adapter of both binaries: a registry per process (no
// global state), the /metrics handler, and the collectors that turn the domain packages'
// observer hooks and cheap scrape-time queries into metrics. The domain packages stay free of
// Prometheus: they expose small observer interfaces and function fields, wired here.
//
// Every metric name starts with walletsaga_. No metric has a per-user label.
//
// Fleet-wide gauges: the collectors that count rows of the shared database (newQueried)
// (sagas by state, the outbox backlog, the notifier's inbox, gaps and dead letters) run in
// every replica, so each replica reports the same fleet-wide value, and their Help says to
// take max() across replicas, never sum(). None is gated on a lock: a gauge served only by
// the relay's lock holder would vanish exactly when no replica holds the lock (every relay
// down, or the lock lost with its connection), which is when the outbox backlog matters
// most, and would leave a gap at each hand-over; nothing holds a lock over the sagas or the
// notifier's tables to gate those on. The price is one query per replica per scrape; all
// but walletsaga_sagas read partial indexes of the rows they count, whereas that one counts
// the whole sagas table (over its (kind, state) index), and grows with it. That price is paid
// at most once per RefreshEvery per replica, whatever scrapes the process (newQueried): a
// scrape is served from memory, so a flood of scrapers, or ones that hang up, cost the
// database nothing more.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/walletsaga/walletsaga/internal/buildinfo"
	"github.com/walletsaga/walletsaga/internal/groupcommit"
	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/inbox"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// fleetWide ends the Help of a gauge counted in the shared database.
const fleetWide = " Counted in Postgres by every replica (at most once per 10s, served from memory), which all report the same fleet-wide value: take max() across replicas, not sum()."

// ScrapeTimeout bounds the database queries of one refresh of the database-backed gauges.
const ScrapeTimeout = 3 * time.Second

// RefreshEvery is how often, at most, a replica queries the database for its gauges: a
// scrape within that of the last query is served the values that query read.
const RefreshEvery = 10 * time.Second

// MaxScrapesInFlight bounds the /metrics requests served at once; one past it is answered
// 503 at once.
const MaxScrapesInFlight = 4

// latencyBuckets cover 1ms to ~16s.
var latencyBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)

// NewRegistry returns a registry of its own with the Go runtime and process collectors and
// walletsaga_build_info.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	NewRuntime(reg)
	return reg
}

// NewRuntime registers the Go runtime and process collectors (go_*, process_*) and
// walletsaga_build_info on reg, as NewRegistry does.
func NewRuntime(reg prometheus.Registerer) {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo(buildinfo.Read()))
}

// buildInfo is walletsaga_build_info: 1, labelled with the build the process runs.
func buildInfo(i buildinfo.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "walletsaga_build_info",
		Help:        "Always 1; its labels say which build runs: the module version, the VCS revision (-modified: the tree had changes) and the Go version.",
		ConstLabels: prometheus.Labels{"version": i.Version, "revision": i.RevisionLabel(), "goversion": i.GoVersion},
	})
	g.Set(1)
	return g
}

// Handler serves reg in the Prometheus text format. A failing scrape query leaves its
// metrics out (logged) rather than failing the whole scrape.
func Handler(reg *prometheus.Registry, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            promLogger{log},
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            reg,
		MaxRequestsInFlight: MaxScrapesInFlight,
	})
}

type promLogger struct{ log *slog.Logger }

func (l promLogger) Println(v ...any) { l.log.Warn("metrics", "err", v) }

// result labels an observed call: ok or error.
func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// queried is a collector whose values come from a database query that runs at most once per
// RefreshEvery, on a context of its own bounded by ScrapeTimeout, never on a scraper's: a
// scrape is served the values of the last query, and starts the next one when those are
// older than RefreshEvery (only the very first scrape waits for its query, at most
// ScrapeTimeout). One query runs at a time, however many scrapes arrive. A failed query
// leaves the metrics out of the scrapes until the next one succeeds (logged by the
// handler), rather than serving stale values as fresh.
type queried struct {
	descs []*prometheus.Desc
	query func(ctx context.Context, ch chan<- prometheus.Metric) error

	mu      sync.Mutex
	values  []prometheus.Metric
	err     error
	at      time.Time     // when the last query ended (zero: none yet)
	running chan struct{} // closed when the running query ends; nil when none runs
}

// newQueried returns a queried collector of descs, whose values query sends.
func newQueried(descs []*prometheus.Desc, query func(ctx context.Context, ch chan<- prometheus.Metric) error) *queried {
	return &queried{descs: descs, query: query}
}

func (q *queried) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range q.descs {
		ch <- d
	}
}

func (q *queried) Collect(ch chan<- prometheus.Metric) {
	q.mu.Lock()
	if q.running == nil && time.Since(q.at) >= RefreshEvery {
		q.running = make(chan struct{})
		go q.refresh(q.running)
	}
	first, running := q.at.IsZero(), q.running
	q.mu.Unlock()
	if first && running != nil {
		t := time.NewTimer(ScrapeTimeout)
		select {
		case <-running:
		case <-t.C:
		}
		t.Stop()
	}
	q.mu.Lock()
	values, err := q.values, q.err
	q.mu.Unlock()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(q.descs[0], err)
		return
	}
	for _, m := range values {
		ch <- m
	}
}

// refresh runs the query and keeps what it sent, then closes done.
func (q *queried) refresh(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), ScrapeTimeout)
	defer cancel()
	out := make(chan prometheus.Metric)
	var values []prometheus.Metric
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for m := range out {
			values = append(values, m)
		}
	}()
	err := q.query(ctx, out)
	close(out)
	<-collected
	q.mu.Lock()
	q.values, q.err, q.at, q.running = values, err, time.Now(), nil
	q.mu.Unlock()
	close(done)
}

// scrape is a collector whose values are read from the process's memory at scrape time.
type scrape struct {
	descs   []*prometheus.Desc
	collect func(ctx context.Context, ch chan<- prometheus.Metric) error
}

func (s scrape) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range s.descs {
		ch <- d
	}
}

func (s scrape) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), ScrapeTimeout)
	defer cancel()
	if err := s.collect(ctx, ch); err != nil {
		ch <- prometheus.NewInvalidMetric(s.descs[0], err)
	}
}

// Saga is the saga engine's metrics: sagas by kind and state (counted in Postgres), and
// step attempts and durations (an engine Observer).
type Saga struct {
	attempts *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewSaga registers the saga metrics on reg; counts is Engine.CountByKindState.
func NewSaga(reg prometheus.Registerer, counts func(context.Context) ([]saga.KindStateCount, error)) *Saga {
	m := &Saga{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "walletsaga_saga_step_attempts_total",
			Help: "Attempts of saga steps and compensations by saga kind, step, phase (forward|compensate) and outcome (done|retry|fail).",
		}, []string{"kind", "step", "phase", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "walletsaga_saga_step_duration_seconds", Buckets: latencyBuckets,
			Help: "Time one attempt of a saga step or compensation took, by saga kind, step and phase.",
		}, []string{"kind", "step", "phase"}),
	}
	desc := prometheus.NewDesc("walletsaga_sagas", "Sagas by kind and state."+fleetWide, []string{"kind", "state"}, nil)
	reg.MustRegister(m.attempts, m.duration, newQueried([]*prometheus.Desc{desc}, func(ctx context.Context, ch chan<- prometheus.Metric) error {
		rows, err := counts(ctx)
		if err != nil {
			return err
		}
		// Every state of every kind seen, zeros included, so series do not come and go.
		byKind := map[string]map[saga.State]int64{}
		for _, r := range rows {
			if byKind[r.Kind] == nil {
				byKind[r.Kind] = map[saga.State]int64{}
			}
			byKind[r.Kind][r.State] += r.Count
		}
		for kind, states := range byKind {
			for _, st := range saga.States {
				ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(states[st]), kind, string(st))
			}
		}
		return nil
	}))
	return m
}

// ObserveStep implements saga.StepObserver.
func (m *Saga) ObserveStep(kind, step, phase string, outcome saga.OutcomeKind, took time.Duration) {
	m.attempts.WithLabelValues(kind, step, phase, outcome.String()).Inc()
	m.duration.WithLabelValues(kind, step, phase).Observe(took.Seconds())
}

// NewOutbox registers the outbox backlog gauges (queried in Postgres); backlog is
// OutboxStore.Backlog.
func NewOutbox(reg prometheus.Registerer, backlog func(context.Context) (wallet.Backlog, error)) {
	n := prometheus.NewDesc("walletsaga_outbox_unpublished", "Outbox events not yet published to RocketMQ."+fleetWide, nil, nil)
	age := prometheus.NewDesc("walletsaga_outbox_oldest_unpublished_age_seconds", "Age of the oldest unpublished outbox event (0 when none)."+fleetWide, nil, nil)
	reg.MustRegister(newQueried([]*prometheus.Desc{n, age}, func(ctx context.Context, ch chan<- prometheus.Metric) error {
		b, err := backlog(ctx)
		if err != nil {
			return err
		}
		ch <- prometheus.MustNewConstMetric(n, prometheus.GaugeValue, float64(b.Unpublished))
		ch <- prometheus.MustNewConstMetric(age, prometheus.GaugeValue, b.OldestAge.Seconds())
		return nil
	}))
}

// NewRelay registers the relay's send latency histogram, its counters and, per broker queue
// of the route it publishes on, each queue's lag and state; the returned function is
// RelayConfig.ObserveSend. stats, when set, is Relay.Stats.
func NewRelay(reg prometheus.Registerer, stats func() ordering.RelayStats) func(time.Duration, error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "walletsaga_relay_send_duration_seconds", Buckets: latencyBuckets,
		Help: "Latency of the outbox relay's ordered sends to RocketMQ, by result (ok|error).",
	}, []string{"result"})
	h.WithLabelValues("ok")
	h.WithLabelValues("error")
	reg.MustRegister(h)
	if stats != nil {
		lag := prometheus.NewDesc("walletsaga_relay_queue_lag_seconds",
			"Age of the oldest outbox event a broker queue's pump holds that the broker has not confirmed yet (0 when none), by queue (broker/id); only on the replica that publishes.",
			[]string{"queue"}, nil)
		state := prometheus.NewDesc("walletsaga_relay_queue_state",
			"1 for the state a broker queue's pump is in, 0 for the others: idle, sending, backing_off (after a failed send), stuck (a send in flight, or failures, for longer than the relay's StuckAfter), by queue.",
			[]string{"queue", "state"}, nil)
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "walletsaga_relay_published_total", Help: "Outbox events this process published."},
				func() float64 { return float64(stats().Published) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "walletsaga_relay_active", Help: "1 when this process holds the relay's advisory lock and publishes."},
				func() float64 {
					if stats().Active {
						return 1
					}
					return 0
				}),
			scrape{descs: []*prometheus.Desc{lag, state}, collect: func(_ context.Context, ch chan<- prometheus.Metric) error {
				for _, q := range stats().Queues {
					name := q.Queue.String()
					ch <- prometheus.MustNewConstMetric(lag, prometheus.GaugeValue, q.Lag.Seconds(), name)
					for _, st := range ordering.QueueStates {
						v := 0.0
						if q.State == st {
							v = 1
						}
						ch <- prometheus.MustNewConstMetric(state, prometheus.GaugeValue, v, name, string(st))
					}
				}
				return nil
			}},
		)
		NewGroupCommit(reg, WriterRelayMarks, func() groupcommit.Stats { return stats().Marks })
	}
	return func(took time.Duration, err error) { h.WithLabelValues(result(err)).Observe(took.Seconds()) }
}

// The writers of walletsaga_groupcommit_*, by their writer label.
const (
	WriterRelayMarks  = "relay_marks"  // walletsvc: the relay's committer, marking what the broker confirmed published
	WriterSagaCommits = "saga_commits" // walletsvc: the saga engine's shared commits (requests and rows: saga commits)
	WriterInbox       = "inbox"        // notifier: the inbox writer, recording the queues' batches
	WriterLaneRecords = "lane_records" // notifier: the lanes' recorder, recording the workers' outcomes
)

// NewGroupCommit registers the counters of one of this process's group-commit writers
// (groupcommit.Committer), labelled writer: the groups it wrote and the requests and rows
// they held. rate(rows) ÷ rate(groups) is how many rows share a statement, the point of
// the writer: near 1 at low load (each pays its own commit), growing with load. stats is the
// writer's Stats.
func NewGroupCommit(reg prometheus.Registerer, writer string, stats func() groupcommit.Stats) {
	labels := prometheus.Labels{"writer": writer}
	for name, c := range map[string]struct {
		help string
		get  func(groupcommit.Stats) int64
	}{
		"walletsaga_groupcommit_groups_total": {"Groups this process's group-commit writers wrote, by writer (" + WriterRelayMarks + ", " + WriterSagaCommits + ", " + WriterInbox + ", " + WriterLaneRecords + "): each one statement or transaction, unless the database refused a row of it.",
			func(s groupcommit.Stats) int64 { return s.Groups }},
		"walletsaga_groupcommit_requests_total": {"Requests this process's group-commit writers wrote, by writer: a pump's confirmed batch (" + WriterRelayMarks + "), a saga's commit (" + WriterSagaCommits + "), a queue's batch (" + WriterInbox + "), a user's outcomes (" + WriterLaneRecords + ").",
			func(s groupcommit.Stats) int64 { return s.Requests }},
		"walletsaga_groupcommit_rows_total": {"Rows this process's group-commit writers wrote, by writer: records marked published, saga commits, messages, outcomes.",
			func(s groupcommit.Stats) int64 { return s.Rows }},
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: c.help, ConstLabels: labels},
			func() float64 { return float64(c.get(stats())) }))
	}
}

// Notifier is what the notifier's delivery metrics read: counters of this process, and a
// scrape-time view of what the gate and the dead letters hold (Postgres).
type Notifier struct {
	Lanes   func() gate.LaneStats
	Inbox   func() inbox.Stats
	Busy    func() int64
	Breaker func() senders.BreakerState
	View    func(context.Context) (gate.View, error)
	// DLQBacklog counts the dead letters not yet in the DLQ topic.
	DLQBacklog func(context.Context) (int64, error)
	// InboxWriter and Recorder are the Stats of the inbox's writer and of the lanes'
	// recorder, the notifier's group-commit writers.
	InboxWriter, Recorder func() groupcommit.Stats
}

// breakerStates are the values of walletsaga_notify_breaker_state.
var breakerStates = map[string]float64{"closed": 0, "half-open": 1, "open": 2}

// NewNotifier registers the notifier's delivery metrics.
func NewNotifier(reg prometheus.Registerer, n Notifier) {
	counter := func(name, help string, labels prometheus.Labels, get func() int64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(get()) }))
	}
	gauge := func(name, help string, get func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, get))
	}
	const deliveries = "SMS outcomes recorded by this process's delivery lanes, by outcome (postponed: held back by the provider breaker, no attempt spent)."
	for outcome, get := range map[string]func(gate.LaneStats) int64{
		"sent":          func(s gate.LaneStats) int64 { return s.Sent },
		"retried":       func(s gate.LaneStats) int64 { return s.Retried },
		"dead_lettered": func(s gate.LaneStats) int64 { return s.DeadLettered },
		"postponed":     func(s gate.LaneStats) int64 { return s.Postponed },
	} {
		counter("walletsaga_notify_deliveries_total", deliveries, prometheus.Labels{"outcome": outcome}, func() int64 { return get(n.Lanes()) })
	}
	const inboxMessages = "Messages this process's orderly consumer wrote to the inbox, by result (ignored: a redelivery of what the inbox has; bad: undecodable, recorded and dead-lettered; superseded: of a history the wallet rewound, set aside and never sent)."
	for result, get := range map[string]func(inbox.Stats) int64{
		"received": func(s inbox.Stats) int64 { return s.Received },
		"ignored":  func(s inbox.Stats) int64 { return s.Ignored },
		"bad":      func(s inbox.Stats) int64 { return s.Bad },
		// superseded: of a history the wallet rewound (a restore), set aside, never sent.
		"superseded": func(s inbox.Stats) int64 { return s.Superseded },
	} {
		counter("walletsaga_notify_inbox_messages_total", inboxMessages, prometheus.Labels{"result": result}, func() int64 { return get(n.Inbox()) })
	}
	counter("walletsaga_notify_history_rewinds_total", "Users whose history the wallet rewound (a restore, a copy, a failover that lost commits) and of whom this process set aside what the gate held from the new epoch's first seq on.",
		nil, func() int64 { return n.Inbox().Rewound })
	counter("walletsaga_notify_baselines_total", "Users this process started past seq 1 because the group started at the end of the topic (CONSUME_FROM=last).",
		nil, func() int64 { return n.Inbox().Baselines })
	counter("walletsaga_notify_inbox_writes_total", "Inbox write transactions this process ran: fewer than the batches received when the queues' batches share commits.",
		nil, func() int64 { return n.Inbox().Writes })
	counter("walletsaga_notify_record_statements_total", "Record statements this process's lanes ran: fewer than the outcomes recorded when the workers' outcomes share statements.",
		nil, func() int64 { return n.Lanes().Records })
	counter("walletsaga_notify_record_failures_total", "Record statements of this process's lanes that failed (the database away, a timeout, a conflict); a user's record is tried a few times.",
		nil, func() int64 { return n.Lanes().RecordFailures })
	counter("walletsaga_notify_records_given_up_total", "Users this process's lanes gave back because their outcomes could not be recorded within the attempts: the next claim sends their SMS again, under the same provider key.",
		nil, func() int64 { return n.Lanes().RecordsGivenUp })
	counter("walletsaga_notify_records_refused_total", "Outcomes the database refused for their data, recorded instead as a failed attempt whose reason is the refusal.",
		nil, func() int64 { return n.Lanes().RecordsRefused })
	counter("walletsaga_notify_outcomes_fenced_total", "Outcomes this process's lanes did not record because their user had been claimed again under a new fence.",
		nil, func() int64 { return n.Lanes().Fenced })
	NewGroupCommit(reg, WriterInbox, n.InboxWriter)
	NewGroupCommit(reg, WriterLaneRecords, n.Recorder)
	gauge("walletsaga_notify_lanes_busy", "Users being delivered to by this process now.", func() float64 { return float64(n.Busy()) })
	gauge("walletsaga_notify_breaker_state", "The SMS provider breaker: 0 closed, 1 half-open (probing), 2 open (SMS held back, no attempts spent).",
		func() float64 { return breakerStates[n.Breaker().State] })
	counter("walletsaga_notify_breaker_opened_total", "Times the SMS provider breaker opened in this process.", nil, func() int64 { return n.Breaker().Opened })

	pending := prometheus.NewDesc("walletsaga_notify_inbox_pending", "SMS in the inbox not finished yet."+fleetWide, nil, nil)
	due := prometheus.NewDesc("walletsaga_notify_due_users", "Users whose next SMS is due for a lane now."+fleetWide, nil, nil)
	alerts := prometheus.NewDesc("walletsaga_notify_gap_alerts", "Users whose next SMS has not arrived, while later ones wait, for longer than GAP_ALERT_AFTER."+fleetWide, nil, nil)
	oldest := prometheus.NewDesc("walletsaga_notify_oldest_gap_seconds", "Age of the oldest gap: a user's next SMS missing while later ones wait (0 when none)."+fleetWide, nil, nil)
	unpublished := prometheus.NewDesc("walletsaga_notify_dlq_unpublished", "Dead letters recorded but not yet published to the DLQ topic."+fleetWide, nil, nil)
	reg.MustRegister(newQueried([]*prometheus.Desc{pending, due, alerts, oldest, unpublished}, func(ctx context.Context, ch chan<- prometheus.Metric) error {
		v, err := n.View(ctx)
		if err != nil {
			return err
		}
		ch <- prometheus.MustNewConstMetric(pending, prometheus.GaugeValue, float64(v.Pending))
		ch <- prometheus.MustNewConstMetric(due, prometheus.GaugeValue, float64(v.Due))
		ch <- prometheus.MustNewConstMetric(alerts, prometheus.GaugeValue, float64(v.GapAlerts))
		ch <- prometheus.MustNewConstMetric(oldest, prometheus.GaugeValue, v.OldestGap)
		backlog, err := n.DLQBacklog(ctx)
		if err != nil {
			return err
		}
		ch <- prometheus.MustNewConstMetric(unpublished, prometheus.GaugeValue, float64(backlog))
		return nil
	}))
}

// NewSMS registers the SMS send latency histogram; the returned function is
// senders.ObservedSender's Observe.
func NewSMS(reg prometheus.Registerer) func(time.Duration, error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "walletsaga_sms_send_duration_seconds", Buckets: latencyBuckets,
		Help: "Latency of SMS sends (the provider calls of the delivery lanes), by result (ok|error).",
	}, []string{"result"})
	h.WithLabelValues("ok")
	h.WithLabelValues("error")
	reg.MustRegister(h)
	return func(took time.Duration, err error) { h.WithLabelValues(result(err)).Observe(took.Seconds()) }
}

// commitToSMSBuckets fit a commit→SMS objective around 1 s: fine below it (where a healthy
// stack's SMS go, in tens to hundreds of milliseconds), with 1 s itself a boundary so the
// objective is exact, then coarse up to the retry window (SMS_DEAD_LETTER_AFTER, 15m).
var commitToSMSBuckets = []float64{0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2.5, 5, 10, 30, 60, 300, 900}

// NewCommitToSMS registers walletsaga_notify_commit_to_sms_seconds, the latency users feel:
// from the wallet's commit of a balance change (the event's occurred_at) to the lane's
// record of its SMS as sent. The returned function is notify.LaneConfig's ObserveSent.
func NewCommitToSMS(reg prometheus.Registerer) func(time.Duration) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "walletsaga_notify_commit_to_sms_seconds", Buckets: commitToSMSBuckets,
		Help: "Time from the wallet's commit of a balance change (the event's occurred_at) to this process's record of its SMS as sent; " +
			"retries included, dead letters and replays not. Each SMS is observed once, by the replica that sent it: sum() across replicas.",
	})
	reg.MustRegister(h)
	return func(d time.Duration) {
		// occurred_at is the wallet database's clock and the record this process's: a skew
		// between them must not make a latency negative.
		h.Observe(max(d, 0).Seconds())
	}
}

// NewDLQ registers the DLQ depth gauge: dead letters not yet replayed, counted in Postgres
// (newQueried); depth is smslog.Store.DLQDepth.
func NewDLQ(reg prometheus.Registerer, depth func(context.Context) (int64, error)) {
	d := prometheus.NewDesc("walletsaga_dlq_depth", "Dead-lettered SMS no operator has replayed yet."+fleetWide, nil, nil)
	reg.MustRegister(newQueried([]*prometheus.Desc{d}, func(ctx context.Context, ch chan<- prometheus.Metric) error {
		n, err := depth(ctx)
		if err != nil {
			return err
		}
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(n))
		return nil
	}))
}

// NewRefusals registers walletsaga_http_refused_total{reason}: requests this process refused
// at the door, past a route's bound on requests in flight (in_flight, 503) or past their
// client's rate (rate, 429).
func NewRefusals(reg prometheus.Registerer, r *httpx.Refusals) {
	for reason, n := range map[string]*atomic.Int64{"in_flight": &r.InFlight, "rate": &r.Rate} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "walletsaga_http_refused_total",
			Help:        "Requests this process refused at the door, by reason: in_flight (past a route's bound on requests served at once: 503) or rate (past their client's RATE_LIMIT: 429).",
			ConstLabels: prometheus.Labels{"reason": reason},
		}, func() float64 { return float64(n.Load()) }))
	}
}

// NewDLQForeign registers walletsaga_notify_dlq_foreign_total: wallet events this process's
// DLQ reconciler found in the DLQ topic that the deployment never dead-lettered, flagged as
// bad messages and taken for nothing else; foreign is Reconciler.Foreign.
func NewDLQForeign(reg prometheus.Registerer, foreign func() int64) {
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "walletsaga_notify_dlq_foreign_total",
		Help: "Wallet events found in the DLQ topic that this deployment never dead-lettered: flagged as bad messages, never taken for a dead letter (whoever published them cannot move a user past an SMS).",
	}, func() float64 { return float64(foreign()) }))
}

// NewBroker registers walletsaga_broker_reachable: 1 while the process reaches the broker
// (the topic has writable queues), 0 otherwise. Neither binary leaves its load balancer for
// it; this gauge, and /healthz, are where its state shows.
func NewBroker(reg prometheus.Registerer, reachable func() bool) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "walletsaga_broker_reachable",
		Help: "1 while the RocketMQ name server routes the topic to a writable queue, 0 otherwise (checked every 5s).",
	}, func() float64 {
		if reachable() {
			return 1
		}
		return 0
	}))
}

// NewWalletEpoch registers walletsaga_wallet_history_rewound_timestamp_seconds: when the
// wallet's current epoch began, if it began because the database's history rewound (a
// restore, a copy, a failover, an operator's word), 0 while it is the database's first. It
// returns the function that sets it from the epoch checks.
func NewWalletEpoch(reg prometheus.Registerer) func(wallet.EpochCheck) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "walletsaga_wallet_history_rewound_timestamp_seconds",
		Help: "When the wallet's current epoch began, as a Unix time, if it began because the database's history rewound (restored, copied, failed over); 0 while the first epoch lasts.",
	})
	reg.MustRegister(g)
	return func(c wallet.EpochCheck) {
		if c.Current.Rewound() {
			g.Set(float64(c.Current.MintedAt.UnixNano()) / 1e9)
		} else {
			g.Set(0)
		}
	}
}

// NewConsumer registers walletsaga_notify_consumer_running: 1 once the notifier's orderly
// consumer has started, 0 while it keeps trying (the broker unreachable at start).
//
// Also how many of the topic's queues it holds, and how many the topic has: summed over a
// group's replicas, the held queues make up the topic once rebalancing settled; a queue that
// nobody holds is consumed by nobody.
func NewConsumer(reg prometheus.Registerer, running func() bool, assignment func() (held, all int)) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "walletsaga_notify_consumer_queues_held",
		Help: "Queues of the events topic this notifier's orderly consumer holds (pulls from, under the broker's lock).",
	}, func() float64 { held, _ := assignment(); return float64(held) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "walletsaga_notify_topic_queues",
		Help: "Queues the events topic has, as this notifier's consumer last read its route (0 before it started).",
	}, func() float64 { _, all := assignment(); return float64(all) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "walletsaga_notify_consumer_running",
		Help: "1 once this notifier's orderly consumer has started, 0 while it is still trying to (the broker unreachable).",
	}, func() float64 {
		if running() {
			return 1
		}
		return 0
	}))
}

// Retention is the pruner's metrics (retention.Observer).
type Retention struct {
	pruned   *prometheus.CounterVec
	oldest   *prometheus.GaugeVec
	lastPass *prometheus.GaugeVec
	interval *prometheus.GaugeVec
}

// NewRetention registers walletsaga_retention_pruned_rows_total, the rows this process's
// pruner deleted, and walletsaga_retention_oldest_row_age_seconds, the age of each table's
// oldest retained row, for the tables named; and, for each table the pruner runs (a window
// that is not 0, from its start), walletsaga_retention_last_pass_timestamp_seconds, when its
// last pass over the table finished, and walletsaga_retention_pass_interval_seconds, the
// pause between its passes.
func NewRetention(reg prometheus.Registerer, tables ...string) *Retention {
	m := &Retention{
		pruned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "walletsaga_retention_pruned_rows_total",
			Help: "Rows this process's pruner deleted once their retention window had passed, by table. Replicas share the work: sum() across replicas.",
		}, []string{"table"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "walletsaga_retention_oldest_row_age_seconds",
			Help: "Age of the oldest row of a table that retention will one day prune, by table (well above its window: the pruner is behind or failing)." +
				" Read in Postgres after each pruning pass by every replica, which all report the same fleet-wide value: take max() across replicas, not sum().",
		}, []string{"table"}),
		lastPass: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "walletsaga_retention_last_pass_timestamp_seconds",
			Help: "Unix time at which this process's pruner last finished a pass over a table without an error (its start, before the first), by table;" +
				" only for the tables it prunes. Older than twice walletsaga_retention_pass_interval_seconds: the pruner is behind or failing.",
		}, []string{"table"}),
		interval: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "walletsaga_retention_pass_interval_seconds",
			Help: "The pause between two passes of this process's pruner over a table, by table; only for the tables it prunes.",
		}, []string{"table"}),
	}
	for _, t := range tables {
		m.pruned.WithLabelValues(t)
		m.oldest.WithLabelValues(t)
	}
	reg.MustRegister(m.pruned, m.oldest, m.lastPass, m.interval)
	return m
}

// Pruned counts n rows of table deleted.
func (m *Retention) Pruned(table string, n int64) { m.pruned.WithLabelValues(table).Add(float64(n)) }

// Scheduled sets table's pass interval, and its last pass to at, the pruner's start.
func (m *Retention) Scheduled(table string, interval time.Duration, at time.Time) {
	m.interval.WithLabelValues(table).Set(interval.Seconds())
	m.lastPass.WithLabelValues(table).Set(float64(at.UnixNano()) / 1e9)
}

// Passed sets the time table's last pass finished.
func (m *Retention) Passed(table string, at time.Time) {
	m.lastPass.WithLabelValues(table).Set(float64(at.UnixNano()) / 1e9)
}

// Oldest sets the age of table's oldest retained row.
func (m *Retention) Oldest(table string, age time.Duration) {
	m.oldest.WithLabelValues(table).Set(age.Seconds())
}
