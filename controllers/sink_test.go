package controllers_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
)

const sinkTable = "revenue_per_minute"

// revenueTable is revenuePipeline writing into a table sink too.
func revenueTable(createTable bool) func(*v1.StreamQuery) {
	return func(q *v1.StreamQuery) {
		revenuePipeline(q)
		q.Spec.Sink = &v1.TableSink{Table: sinkTable, KeyColumns: []string{"key", "windowStart"}, CreateTable: createTable}
	}
}

// sinkInvalid starts an operator and waits for StreamQuery revenue, after
// edit, to be SinkInvalid with a message that says want, with an Event;
// nothing is registered.
func sinkInvalid(h *harness, want string, arrange func(), edit ...func(*v1.StreamQuery)) *v1.StreamQuery {
	t := h.t
	t.Helper()
	h.grant(h.tenant("acme"))
	if arrange != nil {
		arrange()
	}
	h.startOperator(operatorOpts{})
	q := h.reason(h.query(h.namespace(h.tenant("acme")), "revenue", edit...), v1.ReasonSinkInvalid)
	if m := message(q.Status.Conditions); !strings.Contains(m, want) {
		t.Fatalf("message %q, want one that says %q", m, want)
	}
	h.wantEvent(q, v1.ReasonSinkInvalid, want)
	if _, ok := h.registration(h.tenant("acme"), "revenue"); ok {
		t.Fatal("a query whose table sink is invalid was registered")
	}
	return q
}

func (h *harness) sinkColumns(tenant, schema, table string) []celldb.SinkColumn {
	h.t.Helper()
	cols, err := celldb.New(h.broker.Pool).SinkColumns(h.ctx, tenant, schema, table)
	if err != nil {
		h.t.Fatal(err)
	}
	return cols
}

func TestCreateTableMakesTheTableAfterThePipelinesOutputWithAPrimaryKeyOnTheKeyColumns(t *testing.T) {
	h := newHarness(t)
	h.grant(h.tenant("acme"))
	h.startOperator(operatorOpts{})
	q := h.reason(h.query(h.namespace(h.tenant("acme")), "revenue", revenueTable(true)), v1.ReasonRegistered)
	h.wantEvent(q, "TableCreated", sinkTable)
	want := []celldb.SinkColumn{{Name: "key", Type: "text", Required: true}, {Name: "windowStart", Type: "timestamp with time zone", Required: true},
		{Name: "windowEnd", Type: "timestamp with time zone"}, {Name: "revenue", Type: "double precision"}}
	if got := h.sinkColumns(h.tenant("acme"), "", sinkTable); !slices.Equal(got, want) {
		t.Fatalf("columns %+v, want %+v (the key columns NOT NULL: the primary key's)", got, want)
	}
	sq, err := h.broker.DB.StreamQuery(h.ctx, q.Status.QueryID)
	if err != nil {
		t.Fatal(err)
	}
	if sq.SinkTable == nil || *sq.SinkTable != sinkTable || !slices.Equal(sq.SinkKeys, []string{"key", "windowStart"}) || *sq.SinkMode != "upsert" {
		t.Fatalf("registration's table sink %v %v %v, want %s on key, windowStart, upsert", sq.SinkTable, sq.SinkKeys, sq.SinkMode, sinkTable)
	}
	// Removing spec.sink removes the registration's table sink, and
	// leaves the table.
	edit(h, q, func(q *v1.StreamQuery) { q.Spec.Sink = nil })
	h.reason(q, v1.ReasonRegistered)
	eventually(h, q, "without a table sink", func(q *v1.StreamQuery) bool {
		sq, err := h.broker.DB.StreamQuery(h.ctx, q.Status.QueryID)
		return err == nil && sq.SinkTable == nil
	})
	if len(h.sinkColumns(h.tenant("acme"), "", sinkTable)) == 0 {
		t.Fatal("the table went with spec.sink")
	}
}

func TestASinkTableWhoseColumnsDoNotFitThePipelinesOutputIsSinkInvalidWithAnEvent(t *testing.T) {
	h := newHarness(t)
	q := sinkInvalid(h, `column "revenue" is text, which cannot hold the pipeline's double`, func() {
		if err := h.broker.DB.CreateTable(h.ctx, h.tenant("acme"), sinkTable, []dbtest.TableColumn{{Name: "key", Type: "text"},
			{Name: "windowStart", Type: "timestamptz"}, {Name: "windowEnd", Type: "timestamptz"}, {Name: "revenue", Type: "text"},
			{Name: "region", Type: "text", NotNull: true}}, []string{"key", "windowStart"}); err != nil {
			h.t.Fatal(err)
		}
	}, revenueTable(true))
	if m := message(q.Status.Conditions); !strings.Contains(m, `column "region" is NOT NULL with no default`) {
		t.Fatalf("message %q does not name the NOT NULL column the output lacks", m)
	}
	h.noEvent(q, "TableCreated")
}

func TestAnAbsentSinkTableWithoutCreateTableIsSinkInvalid(t *testing.T) {
	h := newHarness(t)
	sinkInvalid(h, fmt.Sprintf("table regent_%s.revenue_per_minute does not exist: create it, or set createTable", h.tenant("acme")),
		nil, revenueTable(false))
}

func TestAKeyColumnOutsideThePipelinesOutputIsSinkInvalid(t *testing.T) {
	sinkInvalid(newHarness(t), `key column "region" is not a member of the pipeline's output`, nil, revenueTable(true), func(q *v1.StreamQuery) {
		q.Spec.Sink.KeyColumns = []string{"region"}
	})
}

func TestASinkTableInAnotherTenantsSchemaIsSinkInvalidAndNothingIsCreatedThere(t *testing.T) {
	h := newHarness(t)
	acme, globex := "regent_"+h.tenant("acme"), "regent_"+h.tenant("globex")
	sinkInvalid(h, fmt.Sprintf(`schema %s is not tenant '%s''s: a query writes only into its tenant's schema, %s`, globex, h.tenant("acme"), acme),
		nil, revenueTable(true), func(q *v1.StreamQuery) { q.Spec.Sink.Schema = globex })
	for _, schema := range []string{globex, acme} {
		if tables, err := h.broker.DB.Tables(h.ctx, schema); err != nil || len(tables) != 0 {
			t.Fatalf("schema %s holds %v (%v) after a refused table sink", schema, tables, err)
		}
	}
}

func TestAStatelessPipelineWhoseOutputIsUnknownBeforeItRunsCannotHaveATableSink(t *testing.T) {
	sinkInvalid(newHarness(t), "give it a project that is a map literal", nil, revenueTable(true), func(q *v1.StreamQuery) {
		q.Spec.Pipeline = &v1.Pipeline{Filter: "payload.amount > 0"}
	})
}
