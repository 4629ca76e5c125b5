package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/harness/procs"
	"github.com/walletsaga/walletsaga/internal/ordering"
)

// newDB creates a database of the run (dropped at the end unless -keep-dbs) and returns its URL.
func (b *bench) newDB(ctx context.Context, suffix string) (string, error) {
	name := "bench_" + strings.ToLower(b.ts) + "_" + suffix
	u, err := createDB(ctx, b.admin, b.cfg.DatabaseURL, name)
	if err != nil {
		return "", err
	}
	b.dbs = append(b.dbs, name)
	return u, nil
}

// withDB returns base with its database name replaced by name.
func withDB(base, name string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("database URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// createDB creates an empty database on the cluster of admin and returns its URL.
func createDB(ctx context.Context, admin *pgxpool.Pool, base, name string) (string, error) {
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return withDB(base, name)
}

func dropDB(ctx context.Context, admin *pgxpool.Pool, name string) error {
	_, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// newTopic creates a topic of the run with queues queues.
func (b *bench) newTopic(ctx context.Context, suffix string, queues int) (string, error) {
	topic := "bench-" + strconv.FormatInt(b.tag, 36) + "-" + suffix
	return topic, createTopic(ctx, b.cfg.Namesrv, b.cfg.BrokerAddr, b.cfg.RMQ, topic, queues)
}

// createTopic creates topic with queues read/write queues on brokerAddr, signed with creds,
// and waits until the name server routes it with that many.
func createTopic(ctx context.Context, namesrv, brokerAddr string, creds ordering.Credentials, topic string, queues int) error {
	adm, err := ordering.NewAdmin([]string{namesrv}, creds)
	if err != nil {
		return err
	}
	defer adm.Close() //nolint:errcheck // an admin client for one topic; a failed close changes nothing
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := adm.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(brokerAddr),
		admin.WithReadQueueNums(queues), admin.WithWriteQueueNums(queues)); err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	var last error
	for ctx.Err() == nil {
		mqs, err := adm.FetchPublishMessageQueues(ctx, topic)
		if err == nil && len(mqs) == queues {
			return nil
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	err = fmt.Errorf("topic %s not routed with %d queues within 30s", topic, queues)
	if last != nil {
		err = fmt.Errorf("%w (last error: %w)", err, last)
	}
	return err
}

// productEnv is the environment of a walletsvc and a notifier of the run on dbURL and topic.
func (b *bench) productEnv(dbURL, topic string) (wallet, notifier map[string]string) {
	common := map[string]string{
		"WALLETSAGA_ENV": "dev", "DATABASE_URL": dbURL, "ROCKETMQ_NAMESRV": b.cfg.Namesrv, "WALLET_EVENTS_TOPIC": topic,
		"ROCKETMQ_ACCESS_KEY": b.cfg.RMQ.AccessKey, "ROCKETMQ_SECRET_KEY": b.cfg.RMQ.SecretKey,
		"LOG_LEVEL": "warn", "MIGRATE_ON_START": "true",
	}
	wallet = map[string]string{"PRODUCER_GROUP": "bench-relay-" + b.ts, "SERVICE_TOKEN": serviceToken,
		"PAYMENT_GATEWAY_URL": b.stub.URL, "MERCHANT_URL": b.stub.URL}
	if b.cfg.SagaWorkers > 0 {
		wallet["SAGA_WORKERS"] = strconv.Itoa(b.cfg.SagaWorkers)
	}
	notifier = map[string]string{
		"CONSUMER_GROUP": "bench-notifier-" + b.ts + "-" + topic, "SMS_SENDER": "log",
		"SMS_FAIL_PHONE_PATTERN": "off", "SMS_FAIL_AMOUNT": "0", "READ_TOKEN": readToken,
	}
	for k, v := range common {
		wallet[k], notifier[k] = v, v
	}
	return wallet, notifier
}

// start runs one of the product's binaries from -bin under name, metered from now on.
func (b *bench) start(ctx context.Context, name, bin string, env map[string]string) (*proc, error) {
	p, err := startProc(ctx, name, filepath.Join(b.cfg.BinDir, bin), filepath.Join(b.cfg.RunDir, b.ts+"-"+name+".log"), env)
	if err != nil {
		return nil, err
	}
	b.meter.procs[name] = p
	return p, nil
}

// stopProc stops the process started under name, if it runs.
func (b *bench) stopProc(name string) {
	if p := b.meter.procs[name]; p != nil {
		stopProc(p)
		delete(b.meter.procs, name)
	}
}

// proc is one of the product's binaries, running.
type proc = procs.Proc

// process is a program the run started and meters: one of the product's binaries (proc), or
// the DTM server (dtmServer).
type process interface {
	Pid() int
	Stop(timeout time.Duration) error
}

// startProc runs bin with env added to the bench's environment, output to logPath, and waits
// until /readyz answers 200 (database and broker reachable).
func startProc(ctx context.Context, name, bin, logPath string, env map[string]string) (*proc, error) {
	return procs.Start(ctx, procs.Spec{Name: name, Bin: bin, Env: env, Log: logPath, Ready: "/readyz"})
}

// stopProc sends SIGTERM and waits (SIGKILL after 20s).
func stopProc(p process) {
	if p != nil {
		_ = p.Stop(20 * time.Second)
	}
}

// peakRSSMiB is VmHWM from /proc/PID/status: the process's peak resident set so far.
func peakRSSMiB(p process) float64 {
	kb := procStatusKB(p.Pid(), "VmHWM")
	return round2(float64(kb) / 1024)
}

func procStatusKB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}
