package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/pg/celldb"
)

func init() { register("emit", runEmit) }

// emitPipeline emits one output per event: the sink's throughput, with as
// little folding as a pipeline does.
var emitPipeline = v1.Pipeline{Project: "{'i': int(payload.i), 'p': partition}"}

// runEmit is Regent's worker on emitPipeline, its N outputs going to a
// sink queue (-sink queue) or as rows of a table sink in mode append
// (-sink table): the two side by side are what a table sink costs. The
// table is created as the operator's createTable creates it, and holds N
// rows at the end.
func runEmit(ctx context.Context, e *Env, res *Result) error {
	query := e.Queue + ".emit"
	switch e.Sink {
	case "queue":
		sink := e.Queue + ".out"
		e.made = append(e.made, sink)
		return runWorker(ctx, e, res, emitPipeline, query, sink)
	case "table":
	default:
		return fmt.Errorf("-sink %q is neither queue nor table", e.Sink)
	}
	if e.DatabaseURL == "" {
		return fmt.Errorf("-sink table needs -database-url, where the table is created")
	}
	cell, err := celldb.Open(ctx, e.DatabaseURL, 1)
	if err != nil {
		return fmt.Errorf("connect to the cell database: %w", err)
	}
	defer cell.Close()
	table := strings.ReplaceAll(e.Queue, "-", "_")
	if _, err := cell.CreateSinkTable(ctx, auth.DefaultTenant, table,
		[]celldb.SinkColumn{{Name: "i", Type: "bigint"}, {Name: "p", Type: "text"}}, nil); err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{"name": query, "source_queue": e.Queue, "config_hash": emitPipeline.ConfigHash(),
		"sink_table": map[string]any{"table": table, "mode": "append"}})
	status, answer, err := e.Do(ctx, "POST", "/streams/v1/queries", body, false)
	if err != nil || status != http.StatusOK {
		return fmt.Errorf("register %s with its table sink: %d %s (%v)", query, status, answer, err)
	}
	if err := runWorker(ctx, e, res, emitPipeline, query, ""); err != nil {
		return err
	}
	rows, err := e.tableRows(ctx, query)
	if err != nil {
		return err
	}
	ok := rows == int64(e.N)
	res.Verified = &ok
	res.Verification = fmt.Sprintf("the table holds %d rows for %d messages", rows, e.N)
	return nil
}

// tableRows is the row count of the query's table sink, as the query
// listing (GET /streams/v1/queries) gives it.
func (e *Env) tableRows(ctx context.Context, query string) (int64, error) {
	status, answer, err := e.Do(ctx, "GET", "/streams/v1/queries", nil, false)
	if err != nil || status != http.StatusOK {
		return 0, fmt.Errorf("list the queries: %d %s (%v)", status, answer, err)
	}
	var list struct {
		Queries []struct {
			Name      string `json:"name"`
			SinkTable *struct {
				Rows *int64 `json:"rows"`
			} `json:"sink_table"`
		} `json:"queries"`
	}
	if err := json.Unmarshal(answer, &list); err != nil {
		return 0, fmt.Errorf("decode the query listing: %w", err)
	}
	for _, q := range list.Queries {
		if q.Name == query && q.SinkTable != nil && q.SinkTable.Rows != nil {
			return *q.SinkTable.Rows, nil
		}
	}
	return 0, fmt.Errorf("the listing has no table sink of %s with its rows", query)
}
