package deploy

// What the binaries export, and a check that a PromQL expression (an alerting or recording
// rule, a dashboard panel) reads only that: every selector it parses to names a metric the
// binaries register (internal/metrics), a series a rule of rules.yml records, or one
// Prometheus writes itself, and matches only labels that series has.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/metrics"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// series is what a metric carries: its label names, each with the values it can take when
// they are known (a constant label's), or nil (any).
type series map[string]map[string]bool

// describer registers collectors on a registry and notes the metrics they describe, with
// their labels.
type describer struct {
	*prometheus.Registry
	metrics map[string]series
}

var descRe = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", .*, constLabels: \{(.*)\}, variableLabels: \{(.*)\}\}$`)

var constLabelRe = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

func (d describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	for desc := range ch {
		m := descRe.FindStringSubmatch(desc.String())
		if m == nil {
			panic("cannot read the descriptor " + desc.String())
		}
		s := d.metrics[m[1]]
		if s == nil {
			s = series{}
			d.metrics[m[1]] = s
		}
		for _, lv := range constLabelRe.FindAllStringSubmatch(m[2], -1) {
			if _, variable := s[lv[1]]; variable && s[lv[1]] == nil {
				continue
			}
			if s[lv[1]] == nil {
				s[lv[1]] = map[string]bool{}
			}
			s[lv[1]][lv[2]] = true
		}
		for l := range strings.SplitSeq(m[3], ",") {
			if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
				s[l] = nil
			}
		}
	}
	return d.Registry.Register(c)
}

func (d describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

// served returns every metric the binaries register (internal/metrics), with its labels.
// Prometheus adds job and instance to each when it scrapes.
var served = sync.OnceValue(func() map[string]series {
	d := describer{Registry: prometheus.NewRegistry(), metrics: map[string]series{}}
	noErr := errors.New("not scraped here")
	metrics.NewRuntime(d)
	metrics.NewSaga(d, func(context.Context) ([]saga.KindStateCount, error) { return nil, noErr })
	metrics.NewOutbox(d, func(context.Context) (wallet.Backlog, error) { return wallet.Backlog{}, noErr })
	metrics.NewRelay(d, func() ordering.RelayStats { return ordering.RelayStats{} })
	metrics.NewBroker(d, func() bool { return true })
	metrics.NewWalletEpoch(d)
	metrics.NewNotifier(d, metrics.Notifier{})
	metrics.NewSMS(d)
	metrics.NewCommitToSMS(d)
	metrics.NewDLQ(d, func(context.Context) (int64, error) { return 0, noErr })
	metrics.NewRefusals(d, &httpx.Refusals{})
	metrics.NewDLQForeign(d, func() int64 { return 0 })
	metrics.NewConsumer(d, func() bool { return true }, func() (int, int) { return 0, 0 })
	metrics.NewRetention(d)
	for _, s := range d.metrics {
		s["job"], s["instance"] = nil, nil
	}
	return d.metrics
})

// synthetic are the series Prometheus writes itself that the rules or dashboards read: a
// target's health, and the rules' alerts (labelled as their rules are).
var synthetic = map[string]series{
	"up":     {"job": nil, "instance": nil},
	"ALERTS": nil,
}

// known is what an expression may read: the binaries' metrics, the series recorded by
// rules.yml (named record, labelled as their expressions leave them) and those Prometheus
// writes.
type known struct {
	served   map[string]series
	recorded map[string]bool
}

func knownSeries(rules []rule) known {
	k := known{served: served(), recorded: map[string]bool{}}
	for _, r := range rules {
		if r.Record != "" {
			k.recorded[r.Record] = true
		}
	}
	return k
}

// problems returns what is wrong with expr: that it does not parse, or each selector that
// reads a series k does not know, or a label that series lacks, or a value a constant
// label never takes.
func (k known) problems(expr string) []string {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if vs.Name == "" {
			out = append(out, fmt.Sprintf("%s: name the metric (not a __name__ matcher), so it can be checked", vs))
			return nil
		}
		s, ok := k.lookup(vs.Name)
		if !ok {
			out = append(out, fmt.Sprintf("%s: no binary serves %s, no rule records it", vs, vs.Name))
			return nil
		}
		if s == nil {
			return nil // labelled by a rule: whatever it keeps
		}
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel {
				continue
			}
			values, has := s[m.Name]
			switch {
			case !has:
				out = append(out, fmt.Sprintf("%s: %s has no label %s (it has %s)", vs, vs.Name, m.Name, labelNames(s)))
			case values != nil && m.Type == labels.MatchEqual && !values[m.Value]:
				out = append(out, fmt.Sprintf("%s: %s's label %s is never %q (it is one of %s)", vs, vs.Name, m.Name, m.Value, labelNames(values)))
			}
		}
		return nil
	})
	return out
}

// lookup returns the labels of the series called name: a served metric (a histogram's
// _bucket, _sum and _count series too, _bucket with le), a recorded one (nil: any label) or
// a synthetic one.
func (k known) lookup(name string) (series, bool) {
	if s, ok := k.served[name]; ok {
		return s, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if s, served := k.served[base]; ok && served {
			if suffix != "_bucket" {
				return s, true
			}
			b := series{"le": nil}
			for l, v := range s {
				b[l] = v
			}
			return b, true
		}
	}
	if k.recorded[name] {
		return nil, true
	}
	s, ok := synthetic[name]
	return s, ok
}

func labelNames[V any](m map[string]V) string {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// TestTheCheckCatchesWhatDrifts: the check that holds the rules and the dashboards to the
// code finds a misspelt metric, a label the metric lacks, a value a constant label never
// takes, an unnamed selector and a syntax error, and passes what the binaries serve.
func TestTheCheckCatchesWhatDrifts(t *testing.T) {
	t.Parallel()
	k := knownSeries([]rule{{Record: "walletsaga:commit_to_sms_slow:ratio_rate5m"}})
	for _, ok := range []string{
		`histogram_quantile(0.99, sum by (le) (rate(walletsaga_notify_commit_to_sms_seconds_bucket{le=~"1|1\\.0"}[5m])))`,
		`sum by (result) (rate(walletsaga_relay_send_duration_seconds_count{result="error", instance="w:8080"}[5m]))`,
		`sum(rate(walletsaga_groupcommit_rows_total{writer="inbox"}[5m])) / sum(rate(walletsaga_groupcommit_groups_total{writer="inbox"}[5m]))`,
		`max by (kind) (walletsaga_sagas{state="needs_attention"})`,
		`walletsaga:commit_to_sms_slow:ratio_rate5m{anything="goes"} / 0.01`,
		`up{job="notifier"} == 0`,
		`ALERTS{alertstate="firing"}`,
		`rate(process_cpu_seconds_total[5m]) and go_goroutines`,
	} {
		require.Empty(t, k.problems(ok), ok)
	}
	for bad, want := range map[string]string{
		`walletsaga_sagaz`:                                                     "no binary serves walletsaga_sagaz",
		`walletsaga_sagas{status="running"}`:                                   "has no label status",
		`walletsaga_relay_send_duration_seconds_bucket{queue="a"}`:             "has no label queue",
		`rate(walletsaga_groupcommit_rows_total{writer="relay_mark"}[5m])`:     `label writer is never "relay_mark"`,
		`walletsaga_notify_deliveries_total{outcome="sent", writer="inbox"}`:   "has no label writer",
		`{__name__=~"walletsaga_.+"}`:                                          "name the metric",
		`walletsaga:commit_to_sms_slow:ratio_rate6m`:                           "no rule records it",
		`sum(rate(walletsaga_notify_deliveries_total[5m])`:                     "unclosed left parenthesis",
		`walletsaga_notify_commit_to_sms_seconds_bucket{le="1"} + on() foo_up`: "no binary serves foo_up",
	} {
		got := strings.Join(k.problems(bad), "\n")
		require.Contains(t, got, want, bad)
	}
}
