package providersim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/walletsaga/walletsaga/internal/redact"
)

// RequestOutage asks the simulator at baseURL (POST /sim/outages, with token) to switch an
// outage of target on for d (0 ends it). It is what `providersim outage` and make chaos call.
// Its errors name the URL as redact.URL shows it.
func RequestOutage(ctx context.Context, baseURL, token, target, mode string, d time.Duration) error {
	if err := checkOutage(target, mode, d); err != nil {
		return err
	}
	body, err := json.Marshal(OutageRequest{Target: target, Mode: mode, Duration: d.String()})
	if err != nil {
		return err
	}
	// Joined, not appended: a base URL's query stays a query.
	u, err := url.JoinPath(baseURL, PathOutages)
	if err != nil {
		return fmt.Errorf("providersim: outage: %w", redact.URLError(err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("providersim: outage: %w", redact.URLError(err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("providersim: outage: %w", redact.URLError(err))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("providersim: outage: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(answer))
	}
	return nil
}
