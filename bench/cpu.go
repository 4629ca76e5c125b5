package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuMeter reads the CPU time of every process of the stack at once.
type cpuMeter struct {
	postmaster, broker int
	procs              map[string]process
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
