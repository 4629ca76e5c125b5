// Command demo plays the walletsaga story against a running walletsvc and notifier, through
// their REST APIs, and prints each user's SMS log in order:
//
//   - user A tops up 100.00 then spends 50.00, ten times in a row (20 balance changes);
//   - user B deposits 100.00, then 4.04 (an amount whose SMS is set to fail: it is
//     dead-lettered after its retries), then 50.00, whose SMS still arrives;
//   - user B buys something the merchant rejects: the refund arrives as its own SMS;
//   - A transfers 25.00 to B, then withdraws 20.00 to her bank account.
//
// With DEMO_EXIT=1 it exits 0 only when both SMS logs are exactly as expected.
package main

import (
	"context"
	"fmt"
	"io"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/telemetry/otlpsink"
)

func main() { cli.Main("demo", run) }

type config struct {
	WalletsvcURL string
	NotifierURL  string
	// WalletsvcLinkURL and NotifierLinkURL are what the printed links and curl lines say:
	// where a person opens the services, which is not where a demo in a container reaches
	// them ("" means the URL the demo calls).
	WalletsvcLinkURL string
	NotifierLinkURL  string
	ServiceToken     string
	ReadToken        string
	// OperatorToken is an operator's token of the services, printed in the consoles'
	// links when it is the documented dev one.
	OperatorToken string
	Exit          bool
	// TracesURL is the demo's OTLP receiver (bin/demo otlp-sink), from which it prints the
	// trace of a deposit; "" when the services export elsewhere.
	TracesURL string
}

// devServiceToken is walletsvc's documented default SERVICE_TOKEN.
const devServiceToken = "walletsaga-dev-service-token" //nolint:gosec // G101: the documented dev token, not a secret

// demoReadToken is the notifier's READ_TOKEN that make demo and the compose file configure.
const demoReadToken = "walletsaga-demo-read-token"

// devOperatorToken is the token of the compose stack's one operator (whose SHA-256 its
// OPERATOR_TOKENS gives walletsvc and the notifier).
const devOperatorToken = "walletsaga-dev-operator-token" //nolint:gosec // G101: the documented dev token, not a secret

func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	// The demo plays against the dev stack: its defaults are the dev stack's.
	f := cli.NewFlags("demo", cli.Dev, getenv, stderr)
	f.String(&c.WalletsvcURL, "WALLETSVC_URL", "http://127.0.0.1:8080", "walletsvc base URL")
	f.String(&c.NotifierURL, "NOTIFIER_URL", "http://127.0.0.1:8081", "notifier base URL")
	f.String(&c.WalletsvcLinkURL, "WALLETSVC_LINK_URL", "", "walletsvc's base URL in the printed links, where a browser opens it (empty: WALLETSVC_URL)")
	f.String(&c.NotifierLinkURL, "NOTIFIER_LINK_URL", "", "the notifier's base URL in the printed links, where a browser opens it (empty: NOTIFIER_URL)")
	f.Secret(&c.ServiceToken, "SERVICE_TOKEN", devServiceToken, "walletsvc's service token (default: the dev token)")
	f.Secret(&c.ReadToken, "READ_TOKEN", "", "the notifier's read token, to read the SMS logs (required; make demo sets "+demoReadToken+")")
	f.Secret(&c.OperatorToken, "OPERATOR_TOKEN", "", "an operator's token of the services: the consoles' links carry it when it is the compose stack's dev one ("+devOperatorToken+")")
	f.Bool(&c.Exit, "DEMO_EXIT", false, "exit when done: status 0 only if the SMS logs are as expected")
	f.String(&c.TracesURL, "DEMO_TRACES_URL", "", "the OTLP receiver both services export to (bin/demo otlp-sink): print a deposit's trace from it")
	if err := f.Parse(args); err != nil {
		return c, err
	}
	if err := f.Err(); err != nil {
		return c, err
	}
	if c.ReadToken == "" {
		return c, fmt.Errorf("READ_TOKEN is required: the notifier's SMS log API needs its read token (the one the notifier runs with)")
	}
	if len(f.FlagSet().Args()) > 0 {
		return c, fmt.Errorf("unexpected arguments %q", f.FlagSet().Args())
	}
	if c.WalletsvcLinkURL == "" {
		c.WalletsvcLinkURL = c.WalletsvcURL
	}
	if c.NotifierLinkURL == "" {
		c.NotifierLinkURL = c.NotifierURL
	}
	return c, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if cli.AskedVersion(args) {
		return cli.PrintVersion(stdout, "demo")
	}
	if len(args) > 0 && args[0] == "otlp-sink" {
		return serveSink(ctx, args[1:], getenv, stdout, stderr)
	}
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	if err := play(ctx, cfg, stdout); err != nil {
		if cfg.Exit {
			return err
		}
		fmt.Fprintln(stderr, "demo:", err)
	}
	return nil
}

// serveSink runs the demo's OTLP/HTTP receiver on HTTP_ADDR until ctx ends: make demo points
// both services at it, and the story prints a deposit's trace from it.
func serveSink(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var addr string
	f := cli.NewFlags("demo otlp-sink", cli.Dev, getenv, stderr)
	f.String(&addr, "HTTP_ADDR", "127.0.0.1:8083", "where to receive OTLP/HTTP traces")
	if err := f.Parse(args); err != nil {
		return err
	}
	if err := f.Err(); err != nil {
		return err
	}
	sink, err := otlpsink.Start(ctx, addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "demo otlp-sink: receiving OTLP/HTTP traces on %s\n", sink.Endpoint())
	<-ctx.Done()
	return sink.Close()
}
