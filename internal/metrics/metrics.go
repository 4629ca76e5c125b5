// Package metrics is the Prometheus adapter of both binaries: a registry per process (no
// global state), the /metrics handler, and the collectors that turn the domain packages'
// observer hooks and cheap scrape-time queries into metrics. The domain packages stay free of
// Prometheus: they expose small observer interfaces and function fields, wired here.
//
// Every metric name starts with walletsaga_. No metric has a per-user label.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// ScrapeTimeout bounds the database queries of one scrape.
const ScrapeTimeout = 3 * time.Second

// latencyBuckets cover 1ms to ~16s.
var latencyBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)

// NewRegistry returns a registry of its own with the Go runtime and process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves reg in the Prometheus text format. A failing scrape query leaves its
// metrics out (logged) rather than failing the whole scrape.
func Handler(reg *prometheus.Registry, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      promLogger{log},
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      reg,
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

// scrape is a collector whose values come from a query run at scrape time.
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

// Saga is the saga engine's metrics: sagas by kind and state (counted at scrape time), and
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
	desc := prometheus.NewDesc("walletsaga_sagas", "Sagas by kind and state (counted in Postgres at scrape time).", []string{"kind", "state"}, nil)
	reg.MustRegister(m.attempts, m.duration, scrape{descs: []*prometheus.Desc{desc}, collect: func(ctx context.Context, ch chan<- prometheus.Metric) error {
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
	}})
	return m
}

// ObserveStep implements saga.StepObserver.
func (m *Saga) ObserveStep(kind, step, phase string, outcome saga.OutcomeKind, took time.Duration) {
	m.attempts.WithLabelValues(kind, step, phase, outcome.String()).Inc()
	m.duration.WithLabelValues(kind, step, phase).Observe(took.Seconds())
}

// NewOutbox registers the outbox backlog gauges (queried at scrape time); backlog is
// OutboxStore.Backlog.
func NewOutbox(reg prometheus.Registerer, backlog func(context.Context) (wallet.Backlog, error)) {
	n := prometheus.NewDesc("walletsaga_outbox_unpublished", "Outbox events not yet published to RocketMQ.", nil, nil)
	age := prometheus.NewDesc("walletsaga_outbox_oldest_unpublished_age_seconds", "Age of the oldest unpublished outbox event (0 when none).", nil, nil)
	reg.MustRegister(scrape{descs: []*prometheus.Desc{n, age}, collect: func(ctx context.Context, ch chan<- prometheus.Metric) error {
		b, err := backlog(ctx)
		if err != nil {
			return err
		}
		ch <- prometheus.MustNewConstMetric(n, prometheus.GaugeValue, float64(b.Unpublished))
		ch <- prometheus.MustNewConstMetric(age, prometheus.GaugeValue, b.OldestAge.Seconds())
		return nil
	}})
}

// NewRelay registers the relay's send latency histogram and its counters; the returned
// function is RelayConfig.ObserveSend. stats, when set, is Relay.Stats.
func NewRelay(reg prometheus.Registerer, stats func() ordering.RelayStats) func(time.Duration, error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "walletsaga_relay_send_duration_seconds", Buckets: latencyBuckets,
		Help: "Latency of the outbox relay's ordered sends to RocketMQ, by result (ok|error).",
	}, []string{"result"})
	h.WithLabelValues("ok")
	h.WithLabelValues("error")
	reg.MustRegister(h)
	if stats != nil {
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
		)
	}
	return func(took time.Duration, err error) { h.WithLabelValues(result(err)).Observe(took.Seconds()) }
}

// Gate is what the notifier's gate metrics read: its decision counters and what it holds.
type Gate interface {
	Stats() ordering.GateStats
	HeadOfLine(ctx context.Context) (ordering.HeadOfLine, error)
}

// NewGate registers the gate's metrics: decisions by verdict, users held by a missing
// predecessor, the longest such wait (head of line) and parked messages.
func NewGate(reg prometheus.Registerer, g Gate) {
	verdicts := []struct {
		v   ordering.Verdict
		get func(ordering.GateStats) int64
	}{
		{ordering.Sent, func(s ordering.GateStats) int64 { return s.Sent }},
		{ordering.Duplicate, func(s ordering.GateStats) int64 { return s.Duplicate }},
		{ordering.Waiting, func(s ordering.GateStats) int64 { return s.Waiting }},
		{ordering.Parked, func(s ordering.GateStats) int64 { return s.Parked }},
		{ordering.Retrying, func(s ordering.GateStats) int64 { return s.Retrying }},
		{ordering.DeadLettered, func(s ordering.GateStats) int64 { return s.DeadLettered }},
	}
	for _, v := range verdicts {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "walletsaga_gate_decisions_total", Help: "Decisions of the ordering gate in this process, by verdict.",
			ConstLabels: prometheus.Labels{"verdict": string(v.v)},
		}, func() float64 { return float64(v.get(g.Stats())) }))
	}
	waiting := prometheus.NewDesc("walletsaga_gate_waiting_users", "Users whose next SMS is held by a missing predecessor.", nil, nil)
	hol := prometheus.NewDesc("walletsaga_gate_head_of_line_wait_seconds", "Longest current wait of a user's SMS for a missing predecessor (0 when none).", nil, nil)
	parked := prometheus.NewDesc("walletsaga_gate_parked", "Messages parked in Postgres behind a missing predecessor.", nil, nil)
	reg.MustRegister(scrape{descs: []*prometheus.Desc{waiting, hol, parked}, collect: func(ctx context.Context, ch chan<- prometheus.Metric) error {
		h, err := g.HeadOfLine(ctx)
		if err != nil {
			return err
		}
		ch <- prometheus.MustNewConstMetric(waiting, prometheus.GaugeValue, float64(h.Waiting))
		ch <- prometheus.MustNewConstMetric(hol, prometheus.GaugeValue, h.OldestWait.Seconds())
		ch <- prometheus.MustNewConstMetric(parked, prometheus.GaugeValue, float64(h.Parked))
		return nil
	}})
}

// NewSMS registers the SMS send latency histogram; the returned function is
// notify.ObservedSender's Observe.
func NewSMS(reg prometheus.Registerer) func(time.Duration, error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "walletsaga_sms_send_duration_seconds", Buckets: latencyBuckets,
		Help: "Latency of SMS sends (the sender behind the gate), by result (ok|error).",
	}, []string{"result"})
	h.WithLabelValues("ok")
	h.WithLabelValues("error")
	reg.MustRegister(h)
	return func(took time.Duration, err error) { h.WithLabelValues(result(err)).Observe(took.Seconds()) }
}

// NewDLQ registers the DLQ depth gauge: dead letters not yet replayed, counted in Postgres at
// scrape time; depth is notify.Store.DLQDepth.
func NewDLQ(reg prometheus.Registerer, depth func(context.Context) (int64, error)) {
	d := prometheus.NewDesc("walletsaga_dlq_depth", "Dead-lettered SMS no operator has replayed yet.", nil, nil)
	reg.MustRegister(scrape{descs: []*prometheus.Desc{d}, collect: func(ctx context.Context, ch chan<- prometheus.Metric) error {
		n, err := depth(ctx)
		if err != nil {
			return err
		}
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(n))
		return nil
	}})
}
