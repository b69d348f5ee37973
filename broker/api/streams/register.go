package streams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/api/streams/wire"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/pg/db"
)

type registerRequest struct {
	Name        string `json:"name"`
	SourceQueue string `json:"source_queue"`
	SinkQueue   string `json:"sink_queue"`
	ConfigHash  string `json:"config_hash"`
	Reset       bool   `json:"reset"`
	// SinkTable is raw so that an absent one (the query's stays as it
	// is) and a null one (none any more) differ.
	SinkTable json.RawMessage `json:"sink_table"`
}

type registerResponse struct {
	Success    bool      `json:"success"`
	QueryID    uuid.UUID `json:"query_id"`
	Name       string    `json:"name"`
	ConfigHash string    `json:"config_hash"`
	Fresh      bool      `json:"fresh"`
	Reset      bool      `json:"reset"`
}

// refusal is the body of a 409 or a 403: the registration did not happen.
type refusal struct {
	Success bool       `json:"success"`
	Denied  bool       `json:"denied,omitempty"`
	Error   string     `json:"error"`
	QueryID *uuid.UUID `json:"query_id,omitempty"`
	Name    string     `json:"name"`
}

// register is POST /streams/v1/queries.
func (s *Service) register(w http.ResponseWriter, r *http.Request) {
	var req registerRequest
	if err := httpx.ReadJSON(r, &req); err != nil {
		httpx.Fail(w, err)
		return
	}
	// Checked before anything runs: a registration without a hash could
	// never detect a changed operator chain.
	switch {
	case req.ConfigHash == "":
		httpx.WriteError(w, http.StatusBadRequest, "config_hash is required")
		return
	case req.Name == "":
		httpx.WriteError(w, http.StatusBadRequest, "name is required")
		return
	case req.SourceQueue == "":
		httpx.WriteError(w, http.StatusBadRequest, "source_queue is required")
		return
	}
	if err := checkRegistration(&req); err != nil {
		httpx.Fail(w, err)
		return
	}
	tableSet, table, err := sinkTableFrom(req.SinkTable)
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	res, err := s.db.Register(r.Context(), db.Registration{
		Tenant:       auth.FromContext(r.Context()).Tenant,
		Name:         req.Name,
		Source:       req.SourceQueue,
		Sink:         req.SinkQueue,
		ConfigHash:   req.ConfigHash,
		Reset:        req.Reset,
		SinkTableSet: tableSet,
		SinkTable:    table,
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	switch res.Outcome {
	case db.Conflict:
		httpx.WriteJSON(w, http.StatusConflict, refusal{Error: res.Message, QueryID: &res.QueryID, Name: req.Name})
	case db.Denied:
		httpx.WriteJSON(w, http.StatusForbidden, refusal{Denied: true, Error: res.Message, Name: req.Name})
	case db.SinkInvalid:
		httpx.WriteJSON(w, http.StatusBadRequest, refusal{Error: "sink_table: " + res.Message, Name: req.Name})
	default:
		// The reset generation and the table sink go in headers: the body
		// is exactly the contract's.
		w.Header().Set(wire.ResetGenerationHeader, strconv.FormatInt(res.ResetGeneration, 10))
		if res.SinkTable != "" {
			w.Header().Set(wire.SinkTableHeader, res.SinkTable)
		}
		httpx.WriteJSON(w, http.StatusOK, registerResponse{
			Success: true, QueryID: res.QueryID, Name: req.Name, ConfigHash: req.ConfigHash,
			Fresh: res.Fresh, Reset: req.Reset,
		})
	}
}

// fail answers a failed call: the detail goes to the log, never the body.
func (s *Service) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		return // the client went away; nobody reads the answer
	case httpx.Internal(err):
		s.log.Error("streams request failed", "path", r.URL.Path, "err", err)
	case db.Unavailable(err):
		s.log.Warn("streams request: database unavailable", "path", r.URL.Path, "err", err)
	}
	httpx.Fail(w, err)
}

// checkRegistration refuses names that can never be stored or never name a
// queue: the queue names follow the queue-name rule, the others the text
// rule.
func checkRegistration(req *registerRequest) error {
	if err := httpx.CheckTexts("name", req.Name, "config_hash", req.ConfigHash); err != nil {
		return err
	}
	for _, q := range []struct{ field, name string }{{"source_queue", req.SourceQueue}, {"sink_queue", req.SinkQueue}} {
		if q.name == "" {
			continue // only the sink may be empty, and the source was required above
		}
		if err := catalog.CheckQueueName(q.name); err != nil {
			return httpx.BadRequest("%s: %s", q.field, err.Error())
		}
	}
	return nil
}

// sinkTableFrom reads a registration's sink_table: absent (set false),
// null (set, nil) or a table sink, whose names follow the text rule. What
// makes a table writable is queen_streams.sink_table_check's to say.
func sinkTableFrom(raw json.RawMessage) (set bool, t *db.SinkTable, err error) {
	switch {
	case len(raw) == 0:
		return false, nil, nil
	case bytes.Equal(raw, []byte("null")):
		return true, nil, nil
	}
	var in wire.SinkTable
	if err := httpx.DecodeJSON(raw, &in); err != nil {
		return false, nil, httpx.BadRequest("sink_table must be an object {table, key_columns, mode, schema}")
	}
	if in.Table == "" {
		return false, nil, httpx.BadRequest("sink_table.table is required")
	}
	if err := httpx.CheckTexts("sink_table.table", in.Table, "sink_table.schema", in.Schema, "sink_table.mode", in.Mode); err != nil {
		return false, nil, err
	}
	for i, k := range in.KeyColumns {
		if err := httpx.CheckElementTexts("sink_table.key_columns", i, "name", k); err != nil {
			return false, nil, err
		}
	}
	t = &db.SinkTable{Schema: in.Schema, Table: in.Table, Keys: in.KeyColumns, Mode: in.Mode}
	if t.Mode == "" {
		t.Mode = db.SinkUpsert
	}
	return true, t, nil
}
