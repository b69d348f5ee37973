package db

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/regent-mq/regent/broker/domain/ids"
)

// Registration is one POST /streams/v1/queries.
type Registration struct {
	Tenant     string
	Name       string
	Source     string
	Sink       string // empty is stored as NULL
	ConfigHash string
	Reset      bool
	// SinkTableSet says that the registration carries the query's table
	// sink, SinkTable (nil: none any more); without it, the query's stays
	// as it is.
	SinkTableSet bool
	SinkTable    *SinkTable
}

// SinkTable is a query's table sink: a table of the query's tenant's
// schema (queen_streams.tenant_schema), its key columns and its mode.
type SinkTable struct {
	// Schema, when set, must be the tenant's schema.
	Schema string
	Table  string
	Keys   []string
	Mode   string // SinkUpsert or SinkAppend
}

// SinkInvalidCode is the Code of a refusal of a table sink
// (queen_streams.sink_table_check).
const SinkInvalidCode = "streams.sink_invalid"

// The modes of a table sink.
const (
	// SinkUpsert: one row per key, replaced when a window is emitted again.
	SinkUpsert = "upsert"
	// SinkAppend: every emitted row is a new one.
	SinkAppend = "append"
)

// Outcome is what a registration came to.
type Outcome string

const (
	// Registered: inserted (Fresh) or re-registered.
	Registered Outcome = "registered"
	// Conflict: the name exists with another config hash and no reset.
	Conflict Outcome = "conflict"
	// Denied: a new name the tenant's quota grant does not allow.
	Denied Outcome = "denied"
	// SinkInvalid: the table sink cannot be written (Message says why);
	// nothing was registered.
	SinkInvalid Outcome = "sink_invalid"
)

// RegisterResult is the answer of Register.
type RegisterResult struct {
	Outcome Outcome
	QueryID uuid.UUID
	Fresh   bool
	Message string // why, for Conflict and Denied
	// ResetGeneration is the query's reset generation once registered:
	// its workers' cycles carry it, and the broker refuses them once a
	// reset or a restore has moved it.
	ResetGeneration int64
	// SinkTable is the query's table sink's table once registered, ""
	// when it has none.
	SinkTable string
}

// Register registers or re-registers a query by name, within its tenant.
func (d *DB) Register(ctx context.Context, r Registration) (RegisterResult, error) {
	id := ids.New()
	var sink *string
	if r.Sink != "" {
		sink = &r.Sink
	}
	var schema, table, mode *string
	var keys []string
	if t := r.SinkTable; t != nil {
		table, mode, keys = &t.Table, &t.Mode, t.Keys
		if t.Schema != "" {
			schema = &t.Schema
		}
	}
	var res RegisterResult
	var qid *uuid.UUID
	var msg *string
	var gen *int64
	var sinkTable *string
	err := d.q.QueryRow(ctx, `SELECT outcome, query_id, fresh, message, reset_generation, sink_table
		FROM queen_streams.register_v3(p_tenant => $1, p_name => $2, p_source => $3, p_sink => $4,
			p_config_hash => $5, p_reset => $6, p_new_id => $7, p_sink_set => $8, p_sink_schema => $9,
			p_sink_table => $10, p_sink_keys => $11, p_sink_mode => $12)`,
		r.Tenant, r.Name, r.Source, sink, r.ConfigHash, r.Reset, id, r.SinkTableSet, schema, table, keys, mode,
	).Scan(&res.Outcome, &qid, &res.Fresh, &msg, &gen, &sinkTable)
	if rf, ok := Refusal(err); ok && rf.Code == SinkInvalidCode {
		// queen_streams.sink_table_check refused the table sink.
		return RegisterResult{Outcome: SinkInvalid, Message: rf.Message}, nil
	}
	if err != nil {
		return RegisterResult{}, fmt.Errorf("register query %q: %w", r.Name, err)
	}
	if qid != nil {
		res.QueryID = *qid
	}
	if msg != nil {
		res.Message = *msg
	}
	if gen != nil {
		res.ResetGeneration = *gen
	}
	if sinkTable != nil {
		res.SinkTable = *sinkTable
	}
	return res, nil
}
