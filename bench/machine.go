package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

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
