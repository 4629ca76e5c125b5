package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
)

// message is one value of govulncheck's JSON stream (protocol v1: the types of
// golang.org/x/vuln/internal/govulncheck), with the fields this program reads.
type message struct {
	Config  *scanConfig `json:"config,omitempty"`
	OSV     *osvEntry   `json:"osv,omitempty"`
	Finding *finding    `json:"finding,omitempty"`
}

type scanConfig struct {
	ProtocolVersion string `json:"protocol_version"`
	ScannerName     string `json:"scanner_name"`
	ScannerVersion  string `json:"scanner_version"`
	DB              string `json:"db"`
	GoVersion       string `json:"go_version"`
	ScanLevel       string `json:"scan_level"`
}

type osvEntry struct {
	ID      string   `json:"id"`
	Summary string   `json:"summary"`
	Aliases []string `json:"aliases"`
}

// finding is one place a vulnerability was found. Its trace runs from the vulnerable symbol
// (first) to this module's code (last); at the package or module level it has one frame
// without a function.
type finding struct {
	OSV          string   `json:"osv"`
	FixedVersion string   `json:"fixed_version"`
	Trace        []*frame `json:"trace"`
}

type frame struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Package  string `json:"package"`
	Function string `json:"function"`
	Receiver string `json:"receiver"`
	Position *struct {
		Filename string `json:"filename"`
		Line     int    `json:"line"`
	} `json:"position"`
}

// reached says whether the code calls the vulnerable symbol (a symbol-level finding).
func (f *finding) reached() bool {
	return len(f.Trace) > 0 && f.Trace[0].Function != ""
}

// scan is what one govulncheck run found.
type scan struct {
	config  scanConfig
	entries map[string]osvEntry
	// reached holds a finding per vulnerability the code calls (the first govulncheck
	// streamed, as an example trace); found one per vulnerability found at any level.
	reached map[string]*finding
	found   map[string]*finding
}

// readScan reads govulncheck's -format json stream.
func readScan(r io.Reader) (*scan, error) {
	s := &scan{entries: map[string]osvEntry{}, reached: map[string]*finding{}, found: map[string]*finding{}}
	var configured bool
	dec := json.NewDecoder(r)
	for {
		var m message
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		switch {
		case m.Config != nil:
			// Reachability is only known from a symbol-level scan, of the protocol read here.
			if !strings.HasPrefix(m.Config.ProtocolVersion, "v1.") {
				return nil, fmt.Errorf("govulncheck protocol %q, not v1", m.Config.ProtocolVersion)
			}
			if m.Config.ScanLevel != "symbol" {
				return nil, fmt.Errorf("govulncheck scanned at the %q level, not symbol", m.Config.ScanLevel)
			}
			s.config, configured = *m.Config, true
		case m.OSV != nil:
			s.entries[m.OSV.ID] = *m.OSV
		case m.Finding != nil:
			f := m.Finding
			if len(f.Trace) == 0 {
				return nil, fmt.Errorf("finding of %s without a trace", f.OSV)
			}
			if _, ok := s.found[f.OSV]; !ok {
				s.found[f.OSV] = f
			}
			if _, ok := s.reached[f.OSV]; !ok && f.reached() {
				s.reached[f.OSV] = f
			}
		}
	}
	if !configured {
		return nil, errors.New("no config message: not govulncheck's JSON output")
	}
	return s, nil
}

// exceptions maps the id of each vulnerability that does not apply to why.
type exceptions map[string]string

var osvID = regexp.MustCompile(`^GO-[0-9]{4}-[0-9]+$`)

// parseExceptions reads the exceptions file: '#' starts a comment line; an entry is a
// vulnerability's id at the start of a line and its reason after it, which indented lines
// continue. Every entry needs a reason, and an id appears once.
func parseExceptions(r io.Reader) (exceptions, error) {
	ex := exceptions{}
	var last string
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), " \t")
		switch {
		case strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#"):
			continue
		case line[0] == ' ' || line[0] == '\t':
			if last == "" {
				return nil, fmt.Errorf("line %d: a reason's continuation before any id", n)
			}
			ex[last] = strings.TrimSpace(ex[last] + " " + strings.TrimSpace(line))
		default:
			id := strings.Fields(line)[0]
			if !osvID.MatchString(id) {
				return nil, fmt.Errorf("line %d: %q is not a Go vulnerability id (GO-YYYY-NNNN)", n, id)
			}
			if _, dup := ex[id]; dup {
				return nil, fmt.Errorf("line %d: %s is listed twice", n, id)
			}
			ex[id] = strings.TrimSpace(line[len(id):])
			last = id
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, id := range slices.Sorted(maps.Keys(ex)) {
		if ex[id] == "" {
			return nil, fmt.Errorf("%s has no reason", id)
		}
	}
	return ex, nil
}

// verdict sorts what a scan found against the exceptions; each list is sorted by id.
type verdict struct {
	unlisted  []string // reached and not an exception: fails
	excepted  []string // reached and an exception
	stale     []string // an exception the scan does not reach: fails
	notCalled []string // found in an imported package or a required module, not reached
}

func decide(s *scan, ex exceptions) verdict {
	var v verdict
	for _, id := range slices.Sorted(maps.Keys(s.found)) {
		_, reached := s.reached[id]
		_, listed := ex[id]
		switch {
		case reached && listed:
			v.excepted = append(v.excepted, id)
		case reached:
			v.unlisted = append(v.unlisted, id)
		default:
			v.notCalled = append(v.notCalled, id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(ex)) {
		if _, reached := s.reached[id]; !reached {
			v.stale = append(v.stale, id)
		}
	}
	return v
}

func (v verdict) ok() bool { return len(v.unlisted) == 0 && len(v.stale) == 0 }

func (v verdict) print(w io.Writer, s *scan, ex exceptions) {
	fmt.Fprintf(w, "vulncheck: %s %s, %s, database %s\n", s.config.ScannerName, s.config.ScannerVersion, s.config.GoVersion, s.config.DB)
	for _, id := range v.unlisted {
		f := s.reached[id]
		fmt.Fprintf(w, "REACHED    %s  %s: %s\n", id, where(f), s.entries[id].Summary)
		fmt.Fprintf(w, "           %s\n", trace(f))
	}
	for _, id := range v.stale {
		fmt.Fprintf(w, "STALE      %s  listed as an exception, but the code does not reach it: remove it from the exceptions\n", id)
	}
	for _, id := range v.excepted {
		fmt.Fprintf(w, "excepted   %s  %s: %s\n           why: %s\n", id, where(s.reached[id]), s.entries[id].Summary, ex[id])
	}
	for _, id := range v.notCalled {
		fmt.Fprintf(w, "not called %s  %s: %s\n", id, where(s.found[id]), s.entries[id].Summary)
	}
	if v.ok() {
		fmt.Fprintf(w, "vulncheck: ok: the code reaches %d known vulnerabilities, each listed as an exception; %d more are in packages it imports or modules it requires, not called\n",
			len(v.excepted), len(v.notCalled))
		return
	}
	fmt.Fprintf(w, "vulncheck: FAIL: %d reached and not listed as exceptions, %d stale exceptions\n", len(v.unlisted), len(v.stale))
}

// where names the vulnerable module (or standard library package) at the version found,
// and the version that fixes it.
func where(f *finding) string {
	top := f.Trace[0]
	name, version, fixed := top.Module, top.Version, f.FixedVersion
	if name == "stdlib" {
		// Go's releases as Go names them: v1.26.8 is go1.26.8.
		name = cmp.Or(top.Package, name)
		version, fixed = goRelease(version), goRelease(fixed)
	}
	if fixed == "" {
		return fmt.Sprintf("%s@%s (no fixed version)", name, version)
	}
	return fmt.Sprintf("%s@%s (fixed in %s)", name, version, fixed)
}

func goRelease(v string) string {
	if rest, ok := strings.CutPrefix(v, "v"); ok {
		return "go" + rest
	}
	return v
}

// trace shows a call path as "file:line: caller → … → vulnerable symbol".
func trace(f *finding) string {
	names := make([]string, 0, len(f.Trace))
	for i := len(f.Trace) - 1; i >= 0; i-- {
		names = append(names, f.Trace[i].name())
	}
	entry := f.Trace[len(f.Trace)-1]
	if entry.Position != nil {
		return fmt.Sprintf("%s:%d: %s", entry.Position.Filename, entry.Position.Line, strings.Join(names, " → "))
	}
	return strings.Join(names, " → ")
}

func (fr *frame) name() string {
	pkg := path.Base(fr.Package)
	switch {
	case fr.Function == "":
		return fr.Package
	case fr.Receiver != "":
		return pkg + ".(" + fr.Receiver + ")." + fr.Function
	default:
		return pkg + "." + fr.Function
	}
}
