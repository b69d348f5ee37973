package db

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/regent-mq/regent/broker/ids"
)

// Registration is one POST /streams/v1/queries.
type Registration struct {
	Tenant     string
	Name       string
	Source     string
	Sink       string // empty is stored as NULL
	ConfigHash string
	Reset      bool
}

// Outcome is what a registration came to.
type Outcome string

const (
	// Registered: inserted (Fresh) or re-registered.
	Registered Outcome = "registered"
	// Conflict: the name exists with another config hash and no reset.
	Conflict Outcome = "conflict"
	// Denied: a new name the tenant's quota grant does not allow.
	Denied Outcome = "denied"
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
}

// Register registers or re-registers a query by name, within its tenant.
func (d *DB) Register(ctx context.Context, r Registration) (RegisterResult, error) {
	id := ids.New()
	var sink *string
	if r.Sink != "" {
		sink = &r.Sink
	}
	var res RegisterResult
	var qid *uuid.UUID
	var msg *string
	var gen *int64
	err := d.q.QueryRow(ctx, `SELECT outcome, query_id, fresh, message, reset_generation
		FROM queen_streams.register_v2(p_tenant => $1, p_name => $2, p_source => $3, p_sink => $4,
			p_config_hash => $5, p_reset => $6, p_new_id => $7)`,
		r.Tenant, r.Name, r.Source, sink, r.ConfigHash, r.Reset, id,
	).Scan(&res.Outcome, &qid, &res.Fresh, &msg, &gen)
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
	return res, nil
}
