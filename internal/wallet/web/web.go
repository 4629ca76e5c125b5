// Package web holds walletsvc's operator console: one HTML file, one script and one style
// sheet, embedded in the binary so the page works with no internet (no CDN, no external
// script).
package web

import "embed"

// FS holds index.html, app.js and style.css.
//
//go:embed index.html app.js style.css
var FS embed.FS
