// Package console is the broker's web console at /console/: plain HTML,
// CSS and JavaScript embedded in the binary, with no build step and nothing
// fetched from elsewhere. The page reads, and acts, only through the
// broker's own JSON routes, with the token the user pastes, so it sees and
// does what that token may and nothing more; the files themselves are
// public. Its actions: an admin pauses and resumes pops, and a read-write
// token deletes a dead letter's message and seeks a group.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/api/server"
)

//go:embed static
var static embed.FS

// Path is where the console is served.
const Path = "/console/"

// Routes serve the console's files.
func Routes() []server.Route {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	serve := http.StripPrefix(Path, http.FileServerFS(files))
	return []server.Route{{Method: http.MethodGet, Path: Path, Level: auth.None, Handler: func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, Path)
		if name == "" {
			name = "index.html"
		}
		if _, err := fs.Stat(files, name); err != nil {
			httpx.WriteError(w, http.StatusNotFound, "Not found")
			return
		}
		h := w.Header()
		// The page runs only its own script and talks only to this broker:
		// a value shown from a message cannot run as code, and the token
		// cannot be sent elsewhere.
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// A broker upgrade brings a new console; revalidate rather than cache.
		h.Set("Cache-Control", "no-cache")
		serve.ServeHTTP(w, r)
	}}}
}
