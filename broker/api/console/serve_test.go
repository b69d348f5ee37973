package console_test

import (
	"io/fs"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/regent-mq/regent/test/brokertest"
)

// The console's files are public, like /health: with auth on, the page
// loads without a token and then asks for one.
func TestConsoleFilesArePublicWithAuthOn(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	for path, kind := range map[string]string{
		"/console/": "text/html", "/console/console.js": "text/javascript", "/console/console.css": "text/css",
	} {
		r := b.Do(t, "GET", path, brokertest.NoToken, nil)
		if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), kind) {
			t.Errorf("GET %s without a token = %d %s, want 200 %s", path, r.Status, r.Header.Get("Content-Type"), kind)
		}
		if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") ||
			!strings.Contains(csp, "connect-src 'self'") || !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q lets the page load or send to elsewhere", path, csp)
		}
	}
}

// A path under /console/ that names no file is the broker's JSON 404, as
// everywhere else.
func TestAnUnknownConsolePathIsTheJSON404(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	for _, path := range []string{"/console/nope.js", "/console/static/console.js", "/console/a/"} {
		r := b.Do(t, "GET", path, "", nil)
		if r.Status != http.StatusNotFound || string(r.Body) != `{"error":"Not found"}` {
			t.Errorf("GET %s = %d %s, want the JSON 404", path, r.Status, r.Body)
		}
	}
}

// No CDN, no web font, no build step: nothing in the files points outside
// the broker, and the page is the files as written.
func TestConsoleFilesLoadNothingFromElsewhere(t *testing.T) {
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|@import|@font-face|url\(`)
	files := os.DirFS("static")
	err := fs.WalkDir(files, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(files, name)
		if err != nil {
			return err
		}
		if m := external.Find(body); m != nil {
			t.Errorf("%s refers to %q: the console must load nothing from elsewhere", name, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
