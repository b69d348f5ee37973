// Package admin serves the admin API routes of queue-admin-api.md that are
// not the data path: the consumer groups (§1), stats refresh, the messages
// (§2), resources (§3) and status (§4) reads, the system switches and shared
// state (§7), and the migration routes Regent does not implement. Their statements
// are broker/pg/db's, and the switches broker/domain/flags'.
package admin

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/api/server"
	"github.com/regent-mq/regent/broker/domain/commit"
	"github.com/regent-mq/regent/broker/domain/flags"
	"github.com/regent-mq/regent/broker/domain/seal"
	"github.com/regent-mq/regent/broker/pg/db"
)

// Spool is this replica's push-maintenance spool (spool.Spool), which the
// maintenance routes report on.
type Spool interface {
	Pending(tenant string) int64
	Healthy() bool
}

// API is the admin routes' handlers.
type API struct {
	store *db.DB
	flags *flags.Flags
	spool Spool
	// after does what committed seeks leave to do: announce the
	// partitions they moved, so that the pops of every replica find them
	// at once.
	after *commit.Applier
	// sealer opens the sealed payloads the message routes show (nil: no
	// key).
	sealer  *seal.Sealer
	logger  *slog.Logger
	replica string
	// The tenants' settled lifetime counters, for status and overview.
	lifetimes lifetimes
}

// New returns the admin API on store; seeks announce through after, the
// maintenance routes report on the spool sp, and the message routes open payloads with
// sealer. replica is this replica's name, as its samples carry it.
func New(store *db.DB, fl *flags.Flags, sp Spool, after *commit.Applier, sealer *seal.Sealer, replica string, logger *slog.Logger) *API {
	return &API{store: store, flags: fl, spool: sp, after: after, sealer: sealer, replica: replica, logger: logger}
}

// Routes are the admin routes and their access levels (§10).
func (a *API) Routes() []server.Route {
	const cg = "/api/v1/consumer-groups"
	routes := []server.Route{
		{Method: "GET", Path: cg, Level: auth.ReadOnly, Handler: a.handleGroups},
		{Method: "GET", Path: cg + "/lagging", Level: auth.ReadOnly, Handler: a.handleLagging},
		{Method: "GET", Path: cg + "/{group}", Level: auth.ReadOnly, Handler: a.handleGroup},
		{Method: "DELETE", Path: cg + "/{group}", Level: auth.Admin, Handler: a.handleDeleteGroup},
		{Method: "DELETE", Path: cg + "/{group}/queues/{queue}", Level: auth.Admin, Handler: a.handleDeleteGroupQueue},
		{Method: "POST", Path: cg + "/{group}/queues/{queue}/seek", Level: auth.ReadWrite, Handler: a.handleSeek},
		{Method: "POST", Path: cg + "/{group}/queues/{queue}/partitions/{partition}/seek", Level: auth.ReadWrite, Handler: a.handlePartitionSeek},
		{Method: "POST", Path: cg + "/{group}/subscription", Level: auth.ReadWrite, Handler: a.handleSubscription},
		{Method: "POST", Path: "/api/v1/stats/refresh", Level: auth.Admin, Handler: handleStatsRefresh},
		{Method: "GET", Path: "/api/v1/messages", Level: auth.ReadOnly, Handler: a.handleMessages},
		{Method: "GET", Path: "/api/v1/messages/{partitionId}/{transactionId}", Level: auth.ReadOnly, Handler: a.handleMessage},
		{Method: "DELETE", Path: "/api/v1/messages/{partitionId}/{transactionId}", Level: auth.ReadWrite, Handler: a.handleDeleteMessage},
		{Method: "GET", Path: "/api/v1/resources/overview", Level: auth.ReadOnly, Handler: a.handleOverview},
		{Method: "GET", Path: "/api/v1/resources/queues", Level: auth.ReadOnly, Handler: a.handleResourceQueues},
		{Method: "GET", Path: "/api/v1/resources/queues/{queue}", Level: auth.ReadOnly, Handler: a.handleResourceQueue},
		{Method: "GET", Path: "/api/v1/resources/namespaces", Level: auth.ReadOnly, Handler: a.handleNamespaces},
		{Method: "GET", Path: "/api/v1/resources/tasks", Level: auth.ReadOnly, Handler: a.handleTasks},
		{Method: "GET", Path: "/api/v1/status", Level: auth.ReadOnly, Handler: a.handleStatus},
		{Method: "GET", Path: "/api/v1/status/queues", Level: auth.ReadOnly, Handler: a.handleStatusQueues},
		{Method: "GET", Path: "/api/v1/status/queues/{queue}", Level: auth.ReadOnly, Handler: a.handleStatusQueue},
		{Method: "GET", Path: "/api/v1/status/queues/{queue}/messages", Level: auth.ReadOnly, Handler: a.handleQueueMessages},
		{Method: "GET", Path: "/api/v1/status/buffers", Level: auth.ReadOnly, Handler: a.handleBuffers},
		{Method: "GET", Path: "/api/v1/system/maintenance", Level: auth.Admin, Handler: a.handleMaintenance},
		{Method: "POST", Path: "/api/v1/system/maintenance", Level: auth.Admin, Handler: a.handleSetMaintenance},
		{Method: "GET", Path: "/api/v1/system/maintenance/pop", Level: auth.Admin, Handler: a.handlePopMaintenance},
		{Method: "POST", Path: "/api/v1/system/maintenance/pop", Level: auth.Admin, Handler: a.handleSetPopMaintenance},
		{Method: "GET", Path: "/api/v1/system/shared-state", Level: auth.Admin, Handler: a.handleSharedState},
	}
	for _, m := range []string{"POST /test-connection", "POST /start", "POST /validate", "POST /reset", "GET /status"} {
		method, path, _ := strings.Cut(m, " ")
		routes = append(routes, server.Route{Method: method, Path: "/api/v1/migration" + path, Level: auth.Admin, Handler: handleMigration})
	}
	return routes
}

// fail writes err, logging it when it is the broker's own fault.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) { fail(a.logger, w, r, err) }

// fail answers err, logging it when it is the broker's own fault.
func fail(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	if httpx.Internal(err) {
		log.Error("admin route failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	httpx.Fail(w, err)
}

// readBody decodes a JSON object body into fields; an empty body is an
// empty object, so that each route says what it misses.
func readBody(r *http.Request, fields *map[string]json.RawMessage) error {
	b, err := httpx.ReadBody(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		*fields = map[string]json.RawMessage{}
		return nil
	}
	if err := httpx.DecodeJSON(b, fields); err != nil {
		if json.Valid(b) {
			return httpx.BadRequest("Request body must be a JSON object")
		}
		return err
	}
	return nil
}

// present reports whether the field is there and not null: null means absent.
func present(fields map[string]json.RawMessage, name string) bool {
	v, ok := fields[name]
	return ok && string(v) != "null"
}

// timeField parses fields[name] as an RFC 3339 string.
func timeField(fields map[string]json.RawMessage, name string) (time.Time, error) {
	var s string
	if err := json.Unmarshal(fields[name], &s); err != nil {
		return time.Time{}, httpx.BadRequest("%s must be an RFC 3339 time string", name)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, httpx.BadRequest("%s must be an RFC 3339 time, not %q", name, truncate(s))
	}
	return t, nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// boolQuery reads a boolean query parameter: true for "true" or "1", false
// for any other value, def when absent.
func boolQuery(r *http.Request, name string, def bool) bool {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def
	}
	return v == "true" || v == "1"
}

// instant formats a time as Queen writes instants: UTC, milliseconds.
func instant(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format("2006-01-02T15:04:05.000Z")
	return &s
}

// ageSeconds is how many whole seconds ago t was, 0 for none.
func ageSeconds(t *time.Time, now time.Time) int64 {
	if t == nil {
		return 0
	}
	return max(int64(now.Sub(*t)/time.Second), 0)
}

func tenant(r *http.Request) string { return auth.FromContext(r.Context()).Tenant }

// minLagSeconds is the lagging route's threshold, the one integer parameter
// whose bad value is a 400 rather than the default (queue-admin-api.md §1).
func minLagSeconds(r *http.Request) (int, error) {
	v := r.URL.Query().Get("minLagSeconds")
	if v == "" {
		return 3600, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, httpx.BadRequest("minLagSeconds must be a non-negative integer, not %q", truncate(v))
	}
	return n, nil
}

// intQuery reads an integer query parameter; one that does not parse, or is
// negative, is def, never a 400 (queue-admin-api.md, conventions).
func intQuery(r *http.Request, name string, def int) int {
	n, err := strconv.Atoi(r.URL.Query().Get(name))
	if err != nil || n < 0 {
		return def
	}
	return n
}

// rangeQuery reads the from and to parameters, by default the last hour.
// Unlike timeRange, from after to is no error: the window is empty.
func rangeQuery(r *http.Request) (from, to time.Time, err error) {
	now := time.Now()
	if from, err = timeQuery(r, "from", now.Add(-time.Hour)); err != nil {
		return from, to, err
	}
	to, err = timeQuery(r, "to", now)
	return from, to, err
}

// timeQuery reads an RFC 3339 query parameter, def when absent.
func timeQuery(r *http.Request, name string, def time.Time) (time.Time, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, httpx.BadRequest("%s must be an RFC 3339 time, not %q", name, truncate(v))
	}
	return t, nil
}

// textQueries reads optional text query parameters, nil for each one absent
// or empty.
func textQueries(r *http.Request, names ...string) ([]*string, error) {
	out := make([]*string, len(names))
	for i, name := range names {
		v := r.URL.Query().Get(name)
		if v == "" {
			continue
		}
		if err := httpx.CheckText(name, v); err != nil {
			return nil, err
		}
		out[i] = &v
	}
	return out, nil
}

// pathTexts reads the path values of names, in order, refusing with a 400
// naming it one that PostgreSQL text cannot hold.
func pathTexts(r *http.Request, names ...string) ([]string, error) {
	out := make([]string, len(names))
	for i, name := range names {
		out[i] = r.PathValue(name)
		if err := httpx.CheckText(name, out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// isText reports whether a path value can name anything stored: one that
// PostgreSQL text cannot hold names nothing.
func isText(v string) bool { return httpx.CheckText("", v) == nil }

// optional is s, or nil when empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
