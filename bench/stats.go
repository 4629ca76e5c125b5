package main

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Latency holds the percentiles of a set of durations, in milliseconds.
type Latency struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// recorder collects durations from many goroutines.
type recorder struct {
	mu sync.Mutex
	d  []time.Duration
}

func (r *recorder) add(d time.Duration) {
	r.mu.Lock()
	r.d = append(r.d, d)
	r.mu.Unlock()
}

func (r *recorder) latency() Latency {
	r.mu.Lock()
	defer r.mu.Unlock()
	return latencyOf(r.d)
}

// latencyOf returns nearest-rank percentiles of ds.
func latencyOf(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	pick := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		i = max(0, min(i, len(s)-1))
		return ms(s[i])
	}
	return Latency{N: len(s), P50: pick(0.50), P95: pick(0.95), P99: pick(0.99), Max: ms(s[len(s)-1])}
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }

func round2(f float64) float64 { return math.Round(f*100) / 100 }

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return round2(float64(n) / d.Seconds())
}
