package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/walletsaga/walletsaga/internal/harness/procs"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/inbox"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/providersim"
	"github.com/walletsaga/walletsaga/internal/telemetry"
	"github.com/walletsaga/walletsaga/internal/testutil/binarytest"
	"github.com/walletsaga/walletsaga/internal/testutil/rmqtest"
	"github.com/walletsaga/walletsaga/internal/testutil/simtest"
	"github.com/walletsaga/walletsaga/internal/testutil/smsprovider"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// TestADepositIsOneTraceFromRequestToSMS runs walletsvc (in this process, as run wires it)
// and the notifier's consumer, inbox and lanes on the real Postgres and broker, with the
// SDK's in-memory exporter as the global tracer provider, and follows one deposit: the API
// span, the saga's start, run and commit, the relay's send, the inbox's arrival and the
// lane's send are one chain of parents and children in one trace, and the SMS provider's
// request carries a traceparent of that trace.
//
// It records through the process's global tracer provider, so it does not run in parallel:
// it runs before the parallel tests of the package start, and its span processors are
// unregistered (every span after it recorded nowhere) when it ends.
func TestADepositIsOneTraceFromRequestToSMS(t *testing.T) {
	b := rmqtest.Require(t)
	spans := tracetest.NewInMemoryExporter()
	var ended wait.Signal
	tp := globalTracerProvider()
	exporter, signal := sdktrace.NewSimpleSpanProcessor(spans), endSignal{&ended}
	tp.RegisterSpanProcessor(exporter)
	tp.RegisterSpanProcessor(signal)
	t.Cleanup(func() {
		tp.UnregisterSpanProcessor(signal)
		tp.UnregisterSpanProcessor(exporter)
	})

	pool, dbURL := testdb.New(t)
	topic := rmqtest.Unique("trace-events")
	b.CreateTopic(t, topic, 4)
	prov := simtest.Start(t, nil, providersim.Options{})
	sms := smsprovider.Start()
	t.Cleanup(sms.Close)

	// The notifier's side, wired as cmd/notifier wires it, on the same database.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	gates := gate.NewStore(pool)
	sender, err := senders.NewWebhookSender(sms.URL(), 2*time.Second, senders.NewWebhookClient(4))
	require.NoError(t, err)
	lanes, err := gate.NewLanes(gates, gate.LaneConfig{Workers: 4, Owner: "trace-test", Poll: 50 * time.Millisecond,
		Policy: gate.DefaultRetryPolicy, Sender: sender, Logger: log})
	require.NoError(t, err)
	in := inbox.NewInbox(inbox.NewStore(pool), gates, func(inbox.Received) { lanes.Wake() }, log)
	in.HandTo(lanes)
	require.NoError(t, in.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, in.Stop(context.Background())) })
	consumer, err := ordering.NewOrderlyConsumer(ordering.ConsumerConfig{Namesrv: []string{b.Namesrv}, Group: rmqtest.Unique("trace-notifier"),
		Topic: topic, FromFirstOffset: true, Credentials: b.Credentials, Logger: log},
		func(ctx context.Context, batch []ordering.Delivery) error {
			msgs := make([]inbox.Message, len(batch))
			for i, d := range batch {
				msgs[i] = inbox.Message{MsgID: d.MsgID, Topic: d.Topic, Queue: d.QueueLabel(), Offset: d.QueueOffset, ShardingKey: d.ShardingKey,
					Body: d.Body, Traceparent: d.Properties[ordering.PropertyTraceparent]}
			}
			return in.Handle(ctx, msgs)
		})
	require.NoError(t, err)
	require.NoError(t, lanes.Start(context.Background()))
	require.NoError(t, consumer.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, consumer.Stop(ctx))
		require.NoError(t, lanes.Stop(ctx))
	})

	p := procs.StartFuncTest(t, "walletsvc", run, []string{"serve"}, binarytest.DevEnv(map[string]string{
		"DATABASE_URL": dbURL, "ROCKETMQ_NAMESRV": b.Namesrv, "WALLET_EVENTS_TOPIC": topic, "PRODUCER_GROUP": rmqtest.Unique("trace-relay"),
		"PAYMENT_GATEWAY_URL": prov.URL, "MERCHANT_URL": prov.URL,
		"ROCKETMQ_ACCESS_KEY": b.Credentials.AccessKey, "ROCKETMQ_SECRET_KEY": b.Credentials.SecretKey,
	}))
	t.Cleanup(func() { require.NoError(t, p.Stop(30*time.Second)) })

	post := func(path, body string) {
		status, out := binarytest.Call(t, http.MethodPost, p.URL+path, DevServiceToken, body)
		require.Less(t, status, 300, "%s: %v", path, out)
	}
	post("/v1/users", `{"name":"Ann","phone":"+8613800138000"}`)
	var user int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT id FROM users WHERE name = 'Ann'`).Scan(&user))
	post(fmt.Sprintf("/v1/users/%d/deposits?wait=true", user), `{"amount":500}`)

	byName := func(name string) []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range spans.GetSpans().Snapshots() {
			if s.Name() == name {
				out = append(out, s)
			}
		}
		return out
	}
	// Spans are seen once ended, and not in the chain's order: the inbox hands a user its
	// write claimed to a worker before the write's span ends, so the send can end first.
	chainNames := []string{"sms.send", "inbox.arrive", "outbox.send", "saga.commit", "saga.run", "saga.start", "POST /v1/users/:id/deposits"}
	wait.On(t, 60*time.Second, "every span from the request to the SMS send", ended.Next, func() bool {
		for _, name := range chainNames {
			if len(byName(name)) == 0 {
				return false
			}
		}
		return true
	})

	api := byName("POST /v1/users/:id/deposits")
	require.Len(t, api, 1, "one server span for the deposit")
	root := api[0]
	require.Equal(t, trace.SpanKindServer, root.SpanKind())
	traceID := root.SpanContext().TraceID()
	// Every span of this trace, by its id; the chain below walks it from the SMS up.
	all := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans.GetSpans().Snapshots() {
		if s.SpanContext().TraceID() == traceID {
			all[s.SpanContext().SpanID()] = s
		}
	}
	sends := byName("sms.send")
	require.Len(t, sends, 1)
	chain := []string{sends[0].Name()}
	for s := sends[0]; s.Parent().IsValid(); {
		require.Equal(t, traceID, s.SpanContext().TraceID(), "span %s is in the deposit's trace", s.Name())
		parent, ok := all[s.Parent().SpanID()]
		require.True(t, ok, "the parent of %s is a span of the deposit's trace", s.Name())
		s = parent
		chain = append(chain, s.Name())
	}
	require.Equal(t, chainNames, chain)

	// The payment gateway's call is a child of the saga's run, through the provider client's
	// own client span; the SMS provider's request carries the lane's trace.
	calls := 0
	for _, s := range all {
		if s.Name() == "saga.call" {
			calls++
			require.Equal(t, "saga.run", all[s.Parent().SpanID()].Name())
		}
	}
	require.Equal(t, 1, calls, "one remote call: the charge")
	got := sms.Calls(nil)
	require.Len(t, got, 1)
	sc := telemetry.Parse(got[0].Traceparent)
	require.True(t, sc.IsValid(), "the SMS request carries a traceparent: %q", got[0].Traceparent)
	require.Equal(t, traceID, sc.TraceID())
	client, ok := all[sc.SpanID()]
	require.True(t, ok, "the traceparent names a span of the trace")
	require.Equal(t, trace.SpanKindClient, client.SpanKind())
	require.Equal(t, sends[0].SpanContext().SpanID(), client.Parent().SpanID(), "the HTTP client span is the lane send span's child")

	// The rows carry it too: the outbox row the send span's parent, the inbox row the
	// arrival span's.
	var outboxTP, inboxTP string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT traceparent FROM wallet_events WHERE user_id = $1`, user).Scan(&outboxTP))
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT traceparent FROM notify.notifications WHERE user_id = $1`, user).Scan(&inboxTP))
	require.Equal(t, byName("outbox.send")[0].Parent().SpanID(), telemetry.Parse(outboxTP).SpanID())
	require.Equal(t, byName("inbox.arrive")[0].SpanContext().SpanID(), telemetry.Parse(inboxTP).SpanID())
}

// endSignal raises its signal after each span ended (and, registered after the exporter,
// exported).
type endSignal struct{ ended *wait.Signal }

func (endSignal) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (e endSignal) OnEnd(sdktrace.ReadOnlySpan)                   { e.ended.Raise() }
func (endSignal) Shutdown(context.Context) error                  { return nil }
func (endSignal) ForceFlush(context.Context) error                { return nil }

// tracerProvider is the process's global tracer provider, set once: the packages' tracers
// follow the first provider set, so a second (go test -count=2) would record nothing.
var (
	tracerProvider     *sdktrace.TracerProvider
	tracerProviderOnce sync.Once
)

func globalTracerProvider() *sdktrace.TracerProvider {
	tracerProviderOnce.Do(func() {
		tracerProvider = sdktrace.NewTracerProvider()
		otel.SetTracerProvider(tracerProvider)
		otel.SetTextMapPropagator(telemetry.Propagator())
	})
	return tracerProvider
}
