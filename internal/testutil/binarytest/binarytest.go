// Package binarytest holds what the binaries' tests (cmd/*) share: their environments,
// their configuration's refusals, help and version, the compose file's runs of them, their
// OpenAPI documents, and calls to them.
package binarytest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/deploy"
	"github.com/walletsaga/walletsaga/internal/buildinfo"
	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/freetext"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testutil/configref"
	"github.com/walletsaga/walletsaga/internal/testutil/openapicheck"
	"github.com/walletsaga/walletsaga/internal/testutil/rmqtest"
)

// Root is the repository's root, seen from a binary's package (cmd/<binary>).
var Root = filepath.Join("..", "..")

// Update asks the tests that hold a document to the code to rewrite its generated lines: an
// OpenAPI document's free-text pattern, docs/CONFIGURATION.md's sections.
var Update = flag.Bool("update", false, "rewrite the documents' generated lines (the OpenAPI free-text pattern, docs/CONFIGURATION.md)")

// DevEnv is the environment of a test that runs a binary on the dev stack: dev mode, asked
// for explicitly, plus kv.
func DevEnv(kv map[string]string) map[string]string {
	env := map[string]string{cli.ModeEnv: "dev"}
	maps.Copy(env, kv)
	return env
}

// Getenv answers from env.
func Getenv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// Parse is a binary's configuration parser (its parseConfig).
type Parse[C any] func(sub string, args []string, getenv func(string) string, stderr io.Writer) (C, []string, error)

// Config is sub's configuration as parse reads it from args and env; its usage and the
// arguments left are dropped.
func Config[C any](parse Parse[C], sub string, env map[string]string, args ...string) (C, error) {
	c, _, err := parse(sub, args, Getenv(env), &bytes.Buffer{})
	return c, err
}

// Refusal is a configuration a binary must refuse, and what its error must say.
type Refusal struct {
	Env  map[string]string
	Args []string
	Want []string
}

// commandLineSecret is the secret the refusals give on the command line: it must never be
// echoed.
const commandLineSecret = "a-secret-given-on-the-command-line"

// refuse runs run with env and args on a context already cancelled: a configuration that is
// wrongly accepted makes run return at once instead of serving (and without an error).
func refuse(t *testing.T, run cli.Run, env map[string]string, args []string) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	err := run(ctx, args, Getenv(env), &out, &out)
	require.Error(t, err)
	return err
}

// RequireRefused runs each case in a subtest: run refuses it with an error that says each
// of its Want, and never the secret the cases give on the command line.
func RequireRefused(t *testing.T, run cli.Run, cases map[string]Refusal) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := refuse(t, run, tc.Env, tc.Args)
			for _, w := range tc.Want {
				require.Contains(t, err.Error(), w)
			}
			require.NotContains(t, err.Error(), commandLineSecret, "a secret is never echoed")
		})
	}
}

// RequireOneMessage runs run with env and args, which hold many problems: the one error
// lists exactly want, one line each, and none of secrets.
func RequireOneMessage(t *testing.T, run cli.Run, env map[string]string, args, want, secrets []string) {
	t.Helper()
	msg := refuse(t, run, env, args).Error()
	require.True(t, strings.HasPrefix(msg, "invalid configuration:\n"), msg)
	for _, w := range want {
		require.Contains(t, msg, "\n  "+w)
	}
	require.Equal(t, len(want), strings.Count(msg, "\n  "), "one line a problem, and no other: %s", msg)
	for _, secret := range secrets {
		require.NotContains(t, msg, secret, "a secret is never echoed")
	}
}

// RequireUnverifiedDatabaseWarned runs sub, a subcommand that opens the database (migrate),
// in production on a database that databaseEnv names over the network with sslmode=require,
// with cli.UnverifiedDatabaseTLSEnv stating why, on a context already cancelled: the
// configuration is taken, and the run warns, before it opens the database, that the server
// is not verified, with the reason and without the password.
func RequireUnverifiedDatabaseWarned(t *testing.T, run cli.Run, sub, databaseEnv string) {
	t.Helper()
	const reason = "the provider's CA bundle is on order; private subnet meanwhile"
	env := map[string]string{ //nolint:gosec // G101: a made-up password, which the log must not show
		databaseEnv:                  "postgres://wallet:a-db-password-of-ours@db.internal:5432/wallet?sslmode=require&connect_timeout=1",
		cli.UnverifiedDatabaseTLSEnv: reason,
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	err := run(ctx, []string{sub}, Getenv(env), &out, &out)
	require.Error(t, err, "the database is never reached")
	require.NotContains(t, err.Error(), "invalid configuration", "the override takes the URL")
	var warned map[string]any
	for line := range strings.Lines(out.String()) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(rec["msg"].(string), "the database server is not verified: sslmode=require ") {
			warned = rec
		}
	}
	require.NotNil(t, warned, "the run warns that the server is not verified: %s", out.String())
	require.Equal(t, "WARN", warned["level"])
	require.Equal(t, reason, warned["reason"])
	require.Equal(t, "db.internal", warned["hosts"])
	require.NotContains(t, out.String(), "a-db-password-of-ours", "the password is never logged")
}

// RequireHelpAndVersion checks, in production with nothing set, that help (-h or --help)
// exits 0 and prints a usage that lists --version and each of want, and that --version and
// -version print program's build.
func RequireHelpAndVersion(t *testing.T, run cli.Run, program, help string, want ...string) {
	t.Helper()
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{help}, Getenv(nil), &out, &errOut))
	for _, w := range append(want, "--version") {
		require.Contains(t, errOut.String(), w)
	}
	for _, args := range [][]string{{"--version"}, {"-version"}} {
		out.Reset()
		errOut.Reset()
		require.NoError(t, run(context.Background(), args, Getenv(nil), &out, &errOut))
		require.Equal(t, buildinfo.Read().String(program)+"\n", out.String())
		require.Empty(t, errOut.String())
	}
}

// Compose is the compose file's runs of one binary, whose configuration is a C.
type Compose[C any] struct {
	// Binary is the command (e.g. "/walletsvc"), DefaultSub the subcommand run takes when
	// the command names none, and Services the services that must run it.
	Binary, DefaultSub string
	Services           []string
	// Parse is the binary's configuration parser.
	Parse Parse[C]
	// Check checks a run's configuration; topics are the topics the compose file creates,
	// with their queues.
	Check func(t *testing.T, r deploy.BinaryRun, cfg C, topics map[string]int)
}

// RequireCompose checks, in a subtest each, every service of docker-compose.yml that runs
// c.Binary: it gets only variables the binary reads (those Parse asks getenv for, each
// flag's default coming from the variable of the same name, so they cannot drift from its
// configuration), with values its configuration accepts, and passes c.Check. The services
// running it are c.Services.
func RequireCompose[C any](t *testing.T, c Compose[C]) {
	t.Helper()
	p, err := deploy.LoadCompose(context.Background(), Root)
	require.NoError(t, err)
	topics, err := deploy.Topics(p)
	require.NoError(t, err)
	runs, err := deploy.RunsOf(p, c.Binary, c.DefaultSub)
	require.NoError(t, err)
	var ran []string
	for _, r := range runs {
		ran = append(ran, r.Name)
		t.Run(r.Name, func(t *testing.T) {
			t.Parallel()
			var cfg C
			read := deploy.RequireReadsEnvironment(t, r, strings.TrimPrefix(c.Binary, "/"), func(getenv func(string) string) error {
				var rest []string
				var err error
				cfg, rest, err = c.Parse(r.Sub, r.Args, getenv, io.Discard)
				require.Empty(t, rest, "%s: arguments", r.Name)
				return err
			})
			require.True(t, read["DATABASE_URL"], "the configuration reads the environment through getenv")
			c.Check(t, r, cfg, topics)
		})
	}
	assert.ElementsMatch(t, c.Services, ran, "services running %s", c.Binary)
}

// RequireServiceCompose is RequireCompose for a service (walletsvc, the notifier), whose
// configuration holds the services' shared settings (service returns them): every run logs
// JSON, and the one of serveSub does not migrate (a job does), is published and scraped
// where it listens, and consumes or publishes a topic the compose file creates with 8
// queues. check, when not nil, checks more of a run.
func RequireServiceCompose[C any](t *testing.T, c Compose[C], serveSub string, service func(C) cli.Service) {
	t.Helper()
	more := c.Check
	c.Check = func(t *testing.T, r deploy.BinaryRun, cfg C, topics map[string]int) {
		s := service(cfg)
		assert.Contains(t, []string{serveSub, "migrate"}, r.Sub, "%s: %s subcommand", r.Name, c.Binary)
		assert.Equal(t, "json", s.LogFormat, "%s", r.Name)
		if r.Sub != serveSub {
			return
		}
		assert.False(t, s.MigrateOnStart, "%s: the migrate job migrates", r.Name)
		deploy.RequirePublishedHTTP(t, r, s.HTTPAddr)
		deploy.RequireScraped(t, Root, r, s.HTTPAddr)
		assert.Equal(t, 8, topics[s.Topic], "%s: the topics job creates %s with 8 queues", r.Name, s.Topic)
		if more != nil {
			more(t, r, cfg, topics)
		}
	}
	RequireCompose(t, c)
}

// RequireConfigReference holds program's section of docs/CONFIGURATION.md to the flags
// parse binds for subcommand sub (rewritten with -update).
func RequireConfigReference[C any](t *testing.T, program, sub string, parse Parse[C]) {
	t.Helper()
	section, err := cli.Reference(program, func(getenv func(string) string, out io.Writer) {
		_, _, _ = parse(sub, nil, getenv, out)
	})
	require.NoError(t, err)
	configref.Require(t, filepath.Join(Root, "docs", "CONFIGURATION.md"), program, section, *Update)
}

// RequireDocumented checks that e, a binary's whole HTTP server, serves exactly the routes
// of doc, the OpenAPI document at path (from the repository's root), that there are routes
// of them, and that the document's free-text pattern is freetext's (rewritten with
// -update).
func RequireDocumented(t *testing.T, e *echo.Echo, doc []byte, path string, routes int) {
	t.Helper()
	openapicheck.RequireServed(t, e, doc, path)
	openapicheck.RequireTextPattern(t, filepath.Join(Root, path), doc, freetext.Pattern(), *Update)
	require.Len(t, openapicheck.Routes(e.Routes()), routes)
}

// Call sends method url with body (JSON) and token (as a bearer token, when not empty),
// and returns the status and the JSON object answered (nil for an empty body).
func Call(t *testing.T, method, url, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	if len(b) > 0 {
		require.NoError(t, json.Unmarshal(b, &out), "%s %s: %s", method, url, b)
	}
	return resp.StatusCode, out
}

// StartConsumer starts an orderly consumer of topic on b, in a group of its own, from the
// topic's first message, handing each batch to h; it stops when the test ends.
func StartConsumer(t *testing.T, b rmqtest.Broker, topic string, h ordering.Handler) {
	t.Helper()
	c, err := ordering.NewOrderlyConsumer(ordering.ConsumerConfig{Namesrv: []string{b.Namesrv}, Group: rmqtest.Unique("test-consumer"),
		Topic: topic, FromFirstOffset: true, Credentials: b.Credentials}, h)
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, c.Stop(ctx))
	})
}

// HangUp returns the address of a server that is no name server: it accepts connections
// and closes them at once. The test holds its port until it ends.
func HangUp(t *testing.T) string {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String()
}
