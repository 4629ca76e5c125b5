// Package javaproducer publishes wallet events to the real broker with the official Apache
// RocketMQ Java client, as a Java service would (WalletEventProducer.java: DefaultMQProducer's
// orderly send with SelectMessageQueueByHash, what Spring's syncSendOrderly does), so that
// tests can hold what such a producer sends to the topic's AsyncAPI document and to the
// notifier.
//
// The client is the version scripts/services.sh pins (RMQ_VERSION), its jars resolved from
// the local Maven repository through deploy/rocketmq/pom.xml (which the broker's own jars come
// from, the client among them) with `mvn dependency:build-classpath`, offline; the program is
// compiled with javac. Both are cached under the run directory (WALLETSAGA_RUN_DIR, else the
// repository's .run/), keyed by the source, the pom and the version, so only a test run after
// one of them changed pays for Maven and javac.
//
// Java, javac, Maven or the jars missing is a missing service: the test fails when services
// are required (WALLETSAGA_REQUIRE_SERVICES=1, CI) and skips otherwise (testenv).
package javaproducer

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walletsaga/walletsaga/internal/testutil/rmqtest"
	"github.com/walletsaga/walletsaga/internal/testutil/testenv"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

//go:embed WalletEventProducer.java
var source []byte

// mainClass is the program's class.
const mainClass = "WalletEventProducer"

// service names what a test needs here, in its skip or failure.
const service = "the RocketMQ Java client (java, javac, mvn and the jars of scripts/services.sh)"

// Producer runs the compiled program.
type Producer struct {
	java      string
	classpath string // the program's classes, then the client's jars
	Version   string // the client's version
}

// Message is one event as the Java producer sends it: Tags and Keys are set on the message
// only when not empty.
type Message struct {
	Event      walletevent.Event
	Tags, Keys string
}

// Sent is where the Java client says a message went.
type Sent struct {
	Broker  string
	QueueID int
	MsgID   string
}

// root is the repository's root.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

var versionLine = regexp.MustCompile(`(?m)^RMQ_VERSION="\$\{RMQ_VERSION:-([0-9][0-9A-Za-z.-]*)\}"$`)

// pinnedVersion is the RocketMQ version scripts/services.sh runs (RMQ_VERSION, overridable
// as there).
func pinnedVersion() (string, error) {
	if v := os.Getenv("RMQ_VERSION"); v != "" {
		return v, nil
	}
	b, err := os.ReadFile(filepath.Join(root(), "scripts", "services.sh"))
	if err != nil {
		return "", err
	}
	m := versionLine.FindSubmatch(b)
	if m == nil {
		return "", errors.New("scripts/services.sh pins no RMQ_VERSION")
	}
	return string(m[1]), nil
}

// runDir is where the stack keeps its state.
func runDir() string {
	if d := os.Getenv("WALLETSAGA_RUN_DIR"); d != "" {
		return d
	}
	return filepath.Join(root(), ".run")
}

// Require returns the producer, compiling it (or reusing the cached build), or fails or
// skips the test as for a missing service.
func Require(t testing.TB) *Producer {
	t.Helper()
	testenv.SkipIfShort(t, service)
	p, err := build(t.Context())
	if err == nil {
		return p
	}
	if testenv.Required() {
		t.Fatalf("%s is required but unusable: %v", service, err)
	}
	t.Skipf("%s unusable (%v): install Java 17 and Maven, and run `make services` to fetch the jars", service, err)
	return nil
}

func build(ctx context.Context) (*Producer, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, err
	}
	version, err := pinnedVersion()
	if err != nil {
		return nil, err
	}
	pom, err := os.ReadFile(filepath.Join(root(), "deploy", "rocketmq", "pom.xml"))
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	for _, part := range [][]byte{source, pom, []byte(version)} {
		_, _ = fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	dir := filepath.Join(runDir(), "java-producer", hex.EncodeToString(h.Sum(nil))[:16])
	p := &Producer{java: java, Version: version}
	if cp, err := os.ReadFile(filepath.Join(dir, "classpath")); err == nil { //nolint:gosec // G304: the cache this package writes
		p.classpath = filepath.Join(dir, "classes") + string(os.PathListSeparator) + strings.TrimSpace(string(cp))
		if _, err := os.Stat(filepath.Join(dir, "classes", mainClass+".class")); err == nil {
			return p, nil
		}
	}
	// Built in a directory of its own and renamed into place: tests of other packages may
	// build at the same time.
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp) //nolint:errcheck // a build directory of its own; left behind, it is only disk
	for _, tool := range []string{"javac", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cpFile := filepath.Join(tmp, "classpath")
	// Offline: the jars are those services.sh resolved for the broker, the client among them.
	if out, err := exec.CommandContext(ctx, "mvn", "-B", "-ntp", "-q", "-o", //nolint:gosec // G204: the repository's own pom
		"-f", filepath.Join(root(), "deploy", "rocketmq", "pom.xml"), "-Drocketmq.version="+version,
		"dependency:build-classpath", "-DincludeScope=runtime", "-Dmdep.outputFile="+cpFile).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mvn dependency:build-classpath (run `make services` to fetch the jars): %w\n%s", err, out)
	}
	cp, err := os.ReadFile(cpFile) //nolint:gosec // G304: the file Maven just wrote
	if err != nil {
		return nil, err
	}
	jars := strings.TrimSpace(string(cp))
	if !strings.Contains(jars, "rocketmq-client-"+version+".jar") {
		return nil, fmt.Errorf("the classpath Maven resolved has no rocketmq-client-%s.jar: %s", version, jars)
	}
	src := filepath.Join(tmp, mainClass+".java")
	if err := os.WriteFile(src, source, 0o600); err != nil {
		return nil, err
	}
	classes := filepath.Join(tmp, "classes")
	if out, err := exec.CommandContext(ctx, "javac", "-Xlint:all", "-Werror", "-d", classes, "-cp", jars, src).CombinedOutput(); err != nil { //nolint:gosec // G204: the embedded source
		return nil, fmt.Errorf("javac %s: %w\n%s", mainClass, err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "classes", mainClass+".class")); statErr != nil {
			return nil, err
		}
		// Another test built it first: theirs is the same build.
	}
	p.classpath = filepath.Join(dir, "classes") + string(os.PathListSeparator) + jars
	return p, nil
}

// Send publishes msgs, in order, to topic on b with b's credentials (each message through
// one orderly send keyed by its user id), and returns where each went.
func (p *Producer) Send(t testing.TB, b rmqtest.Broker, topic string, msgs ...Message) []Sent {
	t.Helper()
	var in bytes.Buffer
	for _, m := range msgs {
		e := m.Event
		fields := []string{
			strconv.FormatInt(e.EventID, 10), strconv.FormatInt(e.UserID, 10), strconv.FormatInt(e.Seq, 10), string(e.Kind),
			strconv.FormatInt(e.Amount, 10), e.Currency, strconv.FormatInt(e.BalanceAfter, 10), strconv.FormatInt(e.SagaID, 10),
			e.Phone, e.Locale, strconv.FormatInt(e.Epoch, 10), strconv.FormatInt(e.EpochSince, 10), m.Tags, m.Keys,
		}
		in.WriteString(strings.Join(fields, "\t") + "\n")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	logs := t.TempDir()
	cmd := exec.CommandContext(ctx, p.java, //nolint:gosec // G204: the program this package compiled
		// The client's logs go to the test's directory, not the home directory's.
		// With the broker's jars on the classpath the client would pick the broker's logging
		// configuration: it is given its own (as internal/ordering's Java checks do).
		"-Duser.home="+logs, "-Drocketmq.client.logRoot="+logs, "-Drmq.logback.configurationFile=rmq.client.logback.xml",
		"-Dfile.encoding=UTF-8", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-cp", p.classpath, mainClass, b.Namesrv, b.Credentials.AccessKey, b.Credentials.SecretKey, topic, rmqtest.Unique("java-producer"))
	cmd.Stdin = &in
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("javaproducer: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	var sent []Sent
	for line := range strings.Lines(stdout.String()) {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		q, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		sent = append(sent, Sent{Broker: f[0], QueueID: q, MsgID: f[2]})
	}
	if len(sent) != len(msgs) {
		t.Fatalf("javaproducer: %d of %d messages sent\nstdout:\n%s\nstderr:\n%s", len(sent), len(msgs), stdout.String(), stderr.String())
	}
	return sent
}
