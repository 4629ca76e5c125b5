package providersim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// RequestOutage asks the simulator at baseURL (POST /sim/outages, with token) to switch an
// outage of target on for d (0 ends it). It is what `providersim outage` and make chaos call.
func RequestOutage(ctx context.Context, baseURL, token, target, mode string, d time.Duration) error {
	if err := checkOutage(target, mode, d); err != nil {
		return err
	}
	body, err := json.Marshal(OutageRequest{Target: target, Mode: mode, Duration: d.String()})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(baseURL, "/")+PathOutages, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("providersim: outage: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("providersim: outage: %w", err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("providersim: outage: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(answer))
	}
	return nil
}
