package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

type apiClient struct {
	base, token string
	hc          *http.Client
}

// serviceToken is the bearer token the bench gives walletsvc (SERVICE_TOKEN) and sends on
// every request; a walletsvc without API authentication ignores both.
const serviceToken = "walletsaga-bench-service-token"

// readToken is the READ_TOKEN of the bench's notifiers: GET /v1/gate needs it.
const readToken = "walletsaga-bench-read-token"

func newAPIClient(base string) apiClient {
	tr := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}
	return apiClient{base: base, token: serviceToken, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

type opAnswer struct {
	ID    int64  `json:"id"`
	State string `json:"state"`
}

// post sends body as JSON to path, with an Idempotency-Key header unless key is "".
func (a apiClient) post(ctx context.Context, path, key string, body any, out any) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+path, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+a.token)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(rb, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decoding %s answer: %w", path, err)
		}
	}
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusAccepted {
		return resp.StatusCode, fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, bytes.TrimSpace(rb))
	}
	return resp.StatusCode, nil
}

// createUsers creates n users with c concurrent clients.
func createUsers(ctx context.Context, a apiClient, n, c int, runTag int64) ([]int64, error) {
	ids := make([]int64, n)
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				var out struct {
					ID int64 `json:"id"`
				}
				// Unique E.164 numbers per run; none ends in 0000 (a demo failure switch).
				phone := fmt.Sprintf("+86%03d%08d", runTag%1000, i*7+1)
				_, err := a.post(ctx, "/v1/users", "", map[string]any{"name": "bench " + strconv.Itoa(i), "phone": phone, "locale": "en"}, &out)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				ids[i] = out.ID
			}
		})
	}
	wg.Wait()
	return ids, firstErr
}
