package httpx

import (
	"io/fs"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/freetext"
)

// PageCSP is the page's Content-Security-Policy: it loads and calls only its own origin, and
// no page may frame it (a frame under another site's page could trick an operator holding
// an operator token into clicks: retry, resolve, replay, skip).
const PageCSP = "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'"

// Page serves a self-contained page from fsys: index.html at GET / (allowed to load only its
// own assets, and framed by no page: PageCSP) and app.js and style.css at GET
// /assets/{name}. A name that is not one of them is a JSON 404 (a file server would list
// directories and redirect index.html).
func Page(fsys fs.FS) (page, asset echo.HandlerFunc) {
	page = func(c echo.Context) error {
		b, err := fs.ReadFile(fsys, "index.html")
		if err != nil {
			return apperr.Wrap(err, apperr.Internal, "the page is missing from the binary")
		}
		h := c.Response().Header()
		h.Set("Content-Security-Policy", PageCSP)
		h.Set("X-Frame-Options", "DENY") // for browsers that do not know frame-ancestors
		h.Set("Cache-Control", "no-cache")
		return c.Blob(http.StatusOK, "text/html; charset=utf-8", b)
	}
	types := map[string]string{"app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8"}
	asset = func(c echo.Context) error {
		name := c.Param("name")
		ct, ok := types[name]
		if !ok {
			return apperr.New(apperr.NotFound, "no asset %q: the page has app.js and style.css", freetext.Clip(name, 40))
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return apperr.Wrap(err, apperr.Internal, "the page's %s is missing from the binary", name)
		}
		c.Response().Header().Set("Cache-Control", "no-cache")
		return c.Blob(http.StatusOK, ct, b)
	}
	return page, asset
}
