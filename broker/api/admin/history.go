package admin

import (
	"log/slog"
	"net/http"
	"slices"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/api/server"
	"github.com/regent-mq/regent/broker/pg/db"
)

// History serves Regent's own history routes, which the console charts
// beside queue-ops' throughput: each consumer group's lag per minute, which
// the backlog refresh samples, and each stream query's cycles per minute,
// which broker/domain/counters counts. Queen has neither. Both read the caller's
// tenant only: another tenant's queue or query reads as one with no
// history.
type History struct {
	db  *db.DB
	log *slog.Logger
}

// NewHistory returns the history routes' handlers.
func NewHistory(d *db.DB, log *slog.Logger) *History { return &History{db: d, log: log} }

// Routes are the history routes, both read-only.
func (h *History) Routes() []server.Route {
	return []server.Route{
		{Method: "GET", Path: "/api/v1/analytics/group-lag", Level: auth.ReadOnly, Handler: h.handleGroupLag},
		{Method: "GET", Path: "/api/v1/analytics/query-cycles", Level: auth.ReadOnly, Handler: h.handleQueryCycles},
	}
}

type lagRow struct {
	Bucket        string  `json:"bucket"`
	ConsumerGroup string  `json:"consumerGroup"`
	Lag           int64   `json:"lag"`
	LagSeconds    float64 `json:"lagSeconds"`
}

// handleGroupLag is GET /api/v1/analytics/group-lag?queue=: the lag of each
// of the queue's consumer groups, in messages and in the seconds its oldest
// unconsumed message waited, by bucket (the bucket's largest sample).
func (h *History) handleGroupLag(w http.ResponseWriter, r *http.Request) {
	win, err := window(r)
	if err == nil && win.Queue == "" {
		err = httpx.BadRequest("queue is required")
	}
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	rows, err := h.db.GroupLag(r.Context(), tenant(r), win)
	if err != nil {
		fail(h.log, w, r, err)
		return
	}
	series := make([]lagRow, len(rows))
	groups := []string{}
	for i, g := range rows {
		series[i] = lagRow{Bucket: bucketKey(g.Bucket), ConsumerGroup: g.Group, Lag: g.Lag, LagSeconds: round2(g.LagSeconds)}
		groups = append(groups, g.Group)
	}
	slices.Sort(groups)
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"timeRange": timeRangeJSON(win), "bucketMinutes": bucketMinutes(win),
		"queue": win.Queue, "groups": slices.Compact(groups), "series": series})
}

type cycleRow struct {
	Bucket  string `json:"bucket"`
	Cycles  int64  `json:"cycles"`
	Refused int64  `json:"refused"`
}

// handleQueryCycles is GET /api/v1/analytics/query-cycles?queryId=: a
// stream query's cycles, committed and refused, by bucket.
func (h *History) handleQueryCycles(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.URL.Query().Get("queryId"))
	if err != nil {
		httpx.Fail(w, httpx.BadRequest("queryId must be a query's id (a UUID), not %q", r.URL.Query().Get("queryId")))
		return
	}
	win, err := window(r)
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	rows, err := h.db.QueryCycles(r.Context(), tenant(r), id, win)
	if err != nil {
		fail(h.log, w, r, err)
		return
	}
	series := make([]cycleRow, len(rows))
	for i, c := range rows {
		series[i] = cycleRow{Bucket: bucketKey(c.Bucket), Cycles: c.Cycles, Refused: c.Refused}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"timeRange": timeRangeJSON(win), "bucketMinutes": bucketMinutes(win),
		"queryId": id, "series": series})
}
