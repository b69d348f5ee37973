package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/ids"
	"github.com/regent-mq/regent/broker/domain/segment"
	"github.com/regent-mq/regent/broker/pg/db"
)

// Bounds of one trace: a trace is a note, not a second payload store.
const (
	maxTraceNames   = 64
	maxTraceNameLen = 255
)

// handleAddTrace is POST /api/v1/traces: a consumer's note on a message
// (§6). An unknown message, or another tenant's, is a 404 with Queen's
// body. Cost: one call (see db.AddTrace).
func (a *Analytics) handleAddTrace(w http.ResponseWriter, r *http.Request) {
	t, err := a.parseTrace(r)
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	found, err := a.store.AddTrace(r.Context(), tenant(r), t)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !found {
		httpx.WriteJSON(w, http.StatusNotFound, map[string]any{"success": false, "error": "Message not found"})
		return
	}
	httpx.WriteJSON(w, http.StatusCreated, map[string]any{"success": true, "traceId": t.ID})
}

func (a *Analytics) parseTrace(r *http.Request) (db.NewTrace, error) {
	t := db.NewTrace{ID: ids.New(), ConsumerGroup: catalog.QueueMode, EventType: "info", Worker: a.replica, Names: []string{}}
	var fields map[string]json.RawMessage
	if err := readBody(r, &fields); err != nil {
		return t, err
	}
	if !present(fields, "transactionId") || !present(fields, "partitionId") {
		return t, httpx.BadRequest("transactionId and partitionId are required")
	}
	var partition string
	for name, dst := range map[string]*string{"transactionId": &t.TransactionID, "partitionId": &partition,
		"consumerGroup": &t.ConsumerGroup, "eventType": &t.EventType} {
		if present(fields, name) && json.Unmarshal(fields[name], dst) != nil {
			return t, httpx.BadRequest("%s must be a string", name)
		}
	}
	if err := httpx.CheckTexts("transactionId", t.TransactionID, "consumerGroup", t.ConsumerGroup, "eventType", t.EventType); err != nil {
		return t, err
	}
	id, err := uuid.Parse(partition)
	if err != nil {
		return t, httpx.NotUUID("partitionId", partition)
	}
	t.PartitionID = id
	if !present(fields, "data") {
		return t, httpx.BadRequest("data is required")
	}
	t.Data = fields["data"]
	if nulEscape(t.Data) {
		return t, httpx.BadRequest("data must not contain \\u0000: PostgreSQL's jsonb cannot hold it")
	}
	if present(fields, "traceNames") {
		var one string
		if json.Unmarshal(fields["traceNames"], &one) == nil {
			t.Names = []string{one}
		} else if json.Unmarshal(fields["traceNames"], &t.Names) != nil {
			return t, httpx.BadRequest("traceNames must be a string or an array of strings")
		}
	}
	slices.Sort(t.Names)
	t.Names = slices.DeleteFunc(slices.Compact(t.Names), func(n string) bool { return n == "" })
	if len(t.Names) > maxTraceNames {
		return t, httpx.BadRequest("traceNames holds %d names; at most %d are allowed", len(t.Names), maxTraceNames)
	}
	for _, n := range t.Names {
		if err := httpx.CheckText("traceNames", n); err != nil {
			return t, err
		}
		if len(n) > maxTraceNameLen {
			return t, httpx.BadRequest("a trace name is at most %d bytes: %q", maxTraceNameLen, truncate(n))
		}
	}
	return t, nil
}

// nulEscape reports whether JSON text holds the escape \u0000 (a backslash
// that is not itself escaped, then u0000).
func nulEscape(j []byte) bool {
	for i := bytes.Index(j, []byte(`\u0000`)); i >= 0; {
		slashes := 0
		for k := i - 1; k >= 0 && j[k] == '\\'; k-- {
			slashes++
		}
		if slashes%2 == 0 {
			return true
		}
		next := bytes.Index(j[i+1:], []byte(`\u0000`))
		if next < 0 {
			return false
		}
		i += 1 + next
	}
	return false
}

// handleMessageTraces is GET /api/v1/traces/{partitionId}/{transactionId}:
// the message's traces, oldest first; an unknown message, or another
// tenant's, has none. Cost: one statement (see db.MessageTraces).
func (a *Analytics) handleMessageTraces(w http.ResponseWriter, r *http.Request) {
	partition, err := uuid.Parse(r.PathValue("partitionId"))
	if err != nil {
		httpx.Fail(w, httpx.NotUUID("partitionId", r.PathValue("partitionId")))
		return
	}
	if err := httpx.CheckText("transactionId", r.PathValue("transactionId")); err != nil {
		httpx.Fail(w, err)
		return
	}
	traces, err := a.store.MessageTraces(r.Context(), tenant(r), partition, r.PathValue("transactionId"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(traces))
	for _, t := range traces {
		out = append(out, traceJSON(t))
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"traces": out})
}

// traceJSON is a trace in Queen's snake_case.
func traceJSON(t db.Trace) map[string]any {
	return map[string]any{"id": t.ID, "event_type": t.EventType, "data": t.Data, "consumer_group": t.ConsumerGroup,
		"worker_id": t.Worker, "created_at": instantOf(t.CreatedAt), "trace_names": nonNil(t.Names)}
}

// handleTracesByName is GET /api/v1/traces/by-name/{traceName}: a page of
// the traces that carry the name, oldest first, with their messages'
// payloads, decrypted. Cost: two statements (see db.TracesByName), and
// the decoding of one segment per trace on the page.
func (a *Analytics) handleTracesByName(w http.ResponseWriter, r *http.Request) {
	// Queen reads + as a space here, as in a query string; PathValue does not.
	raw := strings.TrimPrefix(r.URL.EscapedPath(), "/api/v1/traces/by-name/")
	name, err := url.QueryUnescape(raw)
	if err != nil {
		httpx.Fail(w, httpx.BadRequest("traceName is not percent-encoded: %q", truncate(raw)))
		return
	}
	if err := httpx.CheckText("traceName", name); err != nil {
		httpx.Fail(w, err)
		return
	}
	limit, offset := min(intQuery(r, "limit", 100), 1000), min(intQuery(r, "offset", 0), 1<<30)
	traces, total, err := a.store.TracesByName(r.Context(), tenant(r), name, limit, offset)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(traces))
	for _, t := range traces {
		payload, err := a.payload(t)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		m := traceJSON(t)
		m["transaction_id"], m["partition_id"], m["queue_name"], m["partition_name"] = t.TransactionID, t.PartitionID, t.Queue, t.Partition
		m["message_payload"] = payload
		out = append(out, m)
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"traces": out, "total": total,
		"pagination": map[string]int{"limit": limit, "offset": offset}})
}

// payload is the plaintext payload of a trace's message, or null when its
// segment is gone.
func (a *Analytics) payload(t db.Trace) (json.RawMessage, error) {
	if t.Base == nil {
		return nil, nil
	}
	frames, err := segment.Decode(t.Body, uint64(*t.Checksum), int(*t.Count))
	if err != nil {
		return nil, fmt.Errorf("decode the segment of partition %s at %d: %w", t.PartitionID, *t.Base, err)
	}
	i := t.Offset - *t.Base
	if i < 0 || i >= int64(len(frames)) {
		return nil, fmt.Errorf("partition %s: offset %d is not in the segment at %d", t.PartitionID, t.Offset, *t.Base)
	}
	f := &frames[i]
	if !f.Sealed() {
		if len(f.Payload) == 0 {
			return json.RawMessage("null"), nil
		}
		return f.Payload, nil
	}
	p, err := a.sealer.Open(nil, f.Payload, f.KeyID)
	if err != nil {
		return nil, fmt.Errorf("open the payload of partition %s at %d: %w", t.PartitionID, t.Offset, err)
	}
	return p, nil
}

// handleTraceNames is GET /api/v1/traces/names: a page of the tenant's
// trace names, most recently seen first. Cost: one statement (see
// db.TraceNames).
func (a *Analytics) handleTraceNames(w http.ResponseWriter, r *http.Request) {
	limit, offset := min(intQuery(r, "limit", 50), 1000), min(intQuery(r, "offset", 0), 1<<30)
	names, total, err := a.store.TraceNames(r.Context(), tenant(r), limit, offset)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(names))
	for _, n := range names {
		out = append(out, map[string]any{"trace_name": n.Name, "trace_count": n.Traces, "message_count": n.Messages,
			"last_seen": instantOf(n.LastSeen)})
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"trace_names": out, "total": total,
		"pagination": map[string]int{"limit": limit, "offset": offset}})
}
