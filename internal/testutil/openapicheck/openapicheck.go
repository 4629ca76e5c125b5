// Package openapicheck compares an OpenAPI 3 document with the routes an echo server really
// registered, so the document cannot drift from the code: every route documented, every
// documented operation served.
package openapicheck

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	"go.yaml.in/yaml/v3"
)

var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// Operations returns the document's operations as "METHOD /path" (OpenAPI path templates),
// sorted. It fails unless the document is OpenAPI 3.x with paths.
func Operations(doc []byte) ([]string, error) {
	var d struct {
		OpenAPI string                    `yaml:"openapi"`
		Paths   map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	if !strings.HasPrefix(d.OpenAPI, "3.") {
		return nil, fmt.Errorf("openapi: version %q is not 3.x", d.OpenAPI)
	}
	if len(d.Paths) == 0 {
		return nil, fmt.Errorf("openapi: no paths")
	}
	var out []string
	for p, item := range d.Paths {
		for m, op := range item {
			if !slices.Contains(methods, m) {
				continue // parameters, summary, description
			}
			if _, ok := op.(map[string]any); !ok {
				return nil, fmt.Errorf("openapi: %s %s is not an operation object", m, p)
			}
			if _, ok := op.(map[string]any)["responses"]; !ok {
				return nil, fmt.Errorf("openapi: %s %s has no responses", m, p)
			}
			out = append(out, strings.ToUpper(m)+" "+p)
		}
	}
	slices.Sort(out)
	return out, nil
}

var param = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

// Routes returns echo's registered routes as "METHOD /path" in OpenAPI templating (":id"
// becomes "{id}", a trailing "*" becomes "{path}"), sorted and without duplicates.
func Routes(rs []*echo.Route) []string {
	var out []string
	for _, r := range rs {
		p := param.ReplaceAllString(r.Path, "{$1}")
		if strings.HasSuffix(p, "/*") {
			p = strings.TrimSuffix(p, "*") + "{path}"
		}
		out = append(out, r.Method+" "+p)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Diff returns the routes served but not documented, and the operations documented but not
// served.
func Diff(doc []byte, rs []*echo.Route) (undocumented, missing []string, err error) {
	ops, err := Operations(doc)
	if err != nil {
		return nil, nil, err
	}
	routes := Routes(rs)
	for _, r := range routes {
		if !slices.Contains(ops, r) {
			undocumented = append(undocumented, r)
		}
	}
	for _, o := range ops {
		if !slices.Contains(routes, o) {
			missing = append(missing, o)
		}
	}
	return undocumented, missing, nil
}

// Enum returns the enum of the schema at path in doc, a path of map keys from the
// document's root ("components", "schemas", "Event", "properties", "kind"): what a test
// compares with the code's own list of the values.
func Enum(doc []byte, path ...string) ([]string, error) {
	var node any
	if err := yaml.Unmarshal(doc, &node); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	for i, key := range path {
		m, ok := node.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("openapi: %s is not a map", strings.Join(path[:i], "."))
		}
		if node, ok = m[key]; !ok {
			return nil, fmt.Errorf("openapi: no %s", strings.Join(path[:i+1], "."))
		}
	}
	m, ok := node.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("openapi: %s is not a schema", strings.Join(path, "."))
	}
	list, ok := m["enum"].([]any)
	if !ok {
		return nil, fmt.Errorf("openapi: %s has no enum", strings.Join(path, "."))
	}
	out := make([]string, 0, len(list))
	for _, v := range list {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("openapi: %s.enum holds %v, not a string", strings.Join(path, "."), v)
		}
		out = append(out, s)
	}
	return out, nil
}
