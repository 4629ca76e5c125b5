package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/procs"
)

// --- databases ---

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

// --- topics ---

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

// --- processes ---

// proc is one of the product's binaries, running.
type proc = procs.Proc

// startProc runs bin with env added to the bench's environment, output to logPath, and waits
// until /readyz answers 200 (database and broker reachable).
func startProc(ctx context.Context, name, bin, logPath string, env map[string]string) (*proc, error) {
	return procs.Start(ctx, procs.Spec{Name: name, Bin: bin, Env: env, Log: logPath, Ready: "/readyz"})
}

// stopProc sends SIGTERM and waits (SIGKILL after 20s).
func stopProc(p *proc) {
	if p != nil {
		_ = p.Stop(20 * time.Second)
	}
}

// peakRSSMiB is VmHWM from /proc/PID/status: the process's peak resident set so far.
func peakRSSMiB(p *proc) float64 {
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

// --- CPU accounting ---

// clockTick is USER_HZ, 100 on every Linux the project runs on.
const clockTick = 100

// cpuOf returns the CPU time (user+system) of pid, plus that of its reaped children when
// withChildren (Postgres backends that exited are reaped by the postmaster).
func cpuOf(pid int, withChildren bool) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime is field 14 → f[11], stime f[12], cutime f[13], cstime f[14].
	if len(f) < 15 {
		return 0
	}
	var ticks int64
	idx := []int{11, 12}
	if withChildren {
		idx = append(idx, 13, 14)
	}
	for _, k := range idx {
		n, _ := strconv.ParseInt(f[k], 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTick
}

func ppidOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// clusterCPU is the CPU time of a whole Postgres cluster: the postmaster, its reaped
// children, and its live children.
func clusterCPU(postmaster int) time.Duration {
	if postmaster <= 0 {
		return 0
	}
	total := cpuOf(postmaster, true)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppidOf(pid) == postmaster {
			total += cpuOf(pid, false)
		}
	}
	return total
}

// machineBusy is the CPU time all processors spent outside idle and iowait since boot.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTick
}

// others returns the share (0–1) of the machine's capacity over span that went to processes
// other than those measured (other sessions' builds and tests, the kernel's own threads).
func (s CPUSample) others(span time.Duration, cpus int) float64 {
	if span <= 0 || cpus <= 0 {
		return 0
	}
	rest := s["machine"]
	for k, v := range s {
		if k != "machine" {
			rest -= v
		}
	}
	return round2(max(rest, 0) / (span.Seconds() * float64(cpus)))
}

// selfCPU is this process's CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func pidFromFile(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	n, _ := strconv.Atoi(strings.TrimSpace(line))
	return n
}

// cpuMeter reads the CPU time of every process of the stack at once.
type cpuMeter struct {
	postmaster, broker int
	procs              map[string]*proc
}

// CPUSample is CPU time per process, in seconds.
type CPUSample map[string]float64

func (m *cpuMeter) sample() CPUSample {
	s := CPUSample{"bench": selfCPU().Seconds(), "machine": machineBusy().Seconds()}
	if m.postmaster > 0 {
		s["postgres"] = clusterCPU(m.postmaster).Seconds()
	}
	if m.broker > 0 {
		s["broker"] = cpuOf(m.broker, false).Seconds()
	}
	for name, p := range m.procs {
		if p != nil {
			s[name] = cpuOf(p.Pid(), false).Seconds()
		}
	}
	return s
}

// since returns the CPU seconds spent per process between before and s.
func (s CPUSample) since(before CPUSample) CPUSample {
	out := CPUSample{}
	for k, v := range s {
		if b, ok := before[k]; ok {
			out[k] = round2(v - b)
		}
	}
	return out
}

// --- machine ---

// Machine describes where the bench ran.
type Machine struct {
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpu_model"`
	MemGiB   string `json:"mem_gib"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
	Java     string `json:"java"`
	Postgres string `json:"postgres"`
	RocketMQ string `json:"rocketmq"`
	LoadAvg  string `json:"loadavg_at_start"`
	LoadEnd  string `json:"loadavg_at_end"`
}

func describeMachine(ctx context.Context, admin *pgxpool.Pool, repo string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if kb := memTotalKB(); kb > 0 {
		m.MemGiB = strconv.FormatFloat(float64(kb)/1024/1024, 'f', 1, 64)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.LoadAvg = loadAvg()
	if out, err := exec.CommandContext(ctx, "java", "-version").CombinedOutput(); err == nil {
		m.Java, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
	}
	_ = admin.QueryRow(ctx, "SELECT current_setting('server_version')").Scan(&m.Postgres)
	m.RocketMQ = rocketMQVersion(filepath.Join(repo, "deploy/rocketmq/pom.xml"))
	return m
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func memTotalKB() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return n
		}
	}
	return 0
}

func rocketMQVersion(pom string) string {
	b, err := os.ReadFile(pom)
	if err != nil {
		return ""
	}
	_, rest, ok := bytes.Cut(b, []byte("<rocketmq.version>"))
	if !ok {
		return ""
	}
	v, _, _ := bytes.Cut(rest, []byte("<"))
	return string(v)
}
