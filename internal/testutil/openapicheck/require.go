package openapicheck

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
)

// RequireServed fails t unless e's registered routes and doc's operations match both ways,
// and GET /openapi.yaml, without credentials, serves exactly doc. name says which file doc
// is, for the failure messages.
func RequireServed(t testing.TB, e *echo.Echo, doc []byte, name string) {
	t.Helper()
	undocumented, missing, err := Diff(doc, e.Routes())
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(undocumented) > 0 {
		t.Errorf("routes served but not in %s: %v", name, undocumented)
	}
	if len(missing) > 0 {
		t.Errorf("operations in %s that are not served: %v", name, missing)
	}
	ts := httptest.NewServer(e)
	defer ts.Close()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+"/openapi.yaml", nil)
	if err != nil {
		t.Fatalf("GET /openapi.yaml: %v", err)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("GET /openapi.yaml: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET /openapi.yaml: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /openapi.yaml: status %d, want 200 (the document is open)", resp.StatusCode)
	}
	if !bytes.Equal(b, doc) {
		t.Errorf("GET /openapi.yaml does not serve %s as embedded", name)
	}
}
