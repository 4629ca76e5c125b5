package openapicheck_test

import (
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testutil/openapicheck"
)

func TestDiffFindsBothKindsOfDrift(t *testing.T) {
	t.Parallel()
	doc := []byte(`openapi: 3.0.3
paths:
  /v1/users/{id}:
    parameters: []
    get: {responses: {"200": {description: ok}}}
  /v1/gone:
    post: {responses: {"200": {description: ok}}}
  /assets/{path}:
    get: {responses: {"200": {description: ok}}}
`)
	e := echo.New()
	h := func(echo.Context) error { return nil }
	e.GET("/v1/users/:id", h)
	e.GET("/assets/*", h)
	e.DELETE("/v1/users/:id", h)
	undocumented, missing, err := openapicheck.Diff(doc, e.Routes())
	require.NoError(t, err)
	require.Equal(t, []string{"DELETE /v1/users/{id}"}, undocumented)
	require.Equal(t, []string{"POST /v1/gone"}, missing)

	_, _, err = openapicheck.Diff([]byte("swagger: '2.0'\npaths: {}"), nil)
	require.Error(t, err)
	_, _, err = openapicheck.Diff([]byte("openapi: 3.0.0\npaths:\n  /x:\n    get: {}\n"), nil)
	require.ErrorContains(t, err, "no responses")
}

func TestEnum(t *testing.T) {
	t.Parallel()
	doc := []byte(`openapi: 3.0.3
components:
  schemas:
    Kind: {type: string, enum: [a, b, ""]}
    Event:
      properties:
        kind: {type: string, enum: [a, b]}
        n: {type: integer, enum: [1, 2]}
`)
	got, err := openapicheck.Enum(doc, "components", "schemas", "Event", "properties", "kind")
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, got)
	got, err = openapicheck.Enum(doc, "components", "schemas", "Kind")
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", ""}, got)
	_, err = openapicheck.Enum(doc, "components", "schemas", "Saga")
	require.ErrorContains(t, err, "no components.schemas.Saga")
	_, err = openapicheck.Enum(doc, "components", "schemas", "Event")
	require.ErrorContains(t, err, "has no enum")
	_, err = openapicheck.Enum(doc, "components", "schemas", "Event", "properties", "n")
	require.ErrorContains(t, err, "not a string")
}
