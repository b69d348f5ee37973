package controllers_test

import (
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
func sinkInvalid(t *testing.T, want string, arrange func(h *harness), edit ...func(*v1.StreamQuery)) (*harness, *v1.StreamQuery) {
	t.Helper()
	h := newHarness(t)
	h.grant("acme")
	if arrange != nil {
		arrange(h)
	}
	h.startOperator(operatorOpts{})
	q := h.reason(h.query(h.namespace("acme"), "revenue", edit...), v1.ReasonSinkInvalid)
	if m := message(q.Status.Conditions); !strings.Contains(m, want) {
		t.Fatalf("message %q, want one that says %q", m, want)
	}
	h.wantEvent(q, v1.ReasonSinkInvalid, want)
	if _, ok := h.registration("acme", "revenue"); ok {
		t.Fatal("a query whose table sink is invalid was registered")
	}
	return h, q
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
	h.grant("acme")
	h.startOperator(operatorOpts{})
	q := h.reason(h.query(h.namespace("acme"), "revenue", revenueTable(true)), v1.ReasonRegistered)
	h.wantEvent(q, "TableCreated", sinkTable)
	want := []celldb.SinkColumn{{Name: "key", Type: "text", Required: true}, {Name: "windowStart", Type: "timestamp with time zone", Required: true},
		{Name: "windowEnd", Type: "timestamp with time zone"}, {Name: "revenue", Type: "double precision"}}
	if got := h.sinkColumns("acme", "", sinkTable); !slices.Equal(got, want) {
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
	if len(h.sinkColumns("acme", "", sinkTable)) == 0 {
		t.Fatal("the table went with spec.sink")
	}
}

func TestASinkTableWhoseColumnsDoNotFitThePipelinesOutputIsSinkInvalidWithAnEvent(t *testing.T) {
	h, q := sinkInvalid(t, `column "revenue" is text, which cannot hold the pipeline's double`, func(h *harness) {
		if err := h.broker.DB.CreateTable(h.ctx, "acme", sinkTable, []dbtest.TableColumn{{Name: "key", Type: "text"},
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
	sinkInvalid(t, `table regent_acme.revenue_per_minute does not exist: create it, or set createTable`, nil, revenueTable(false))
}

func TestAKeyColumnOutsideThePipelinesOutputIsSinkInvalid(t *testing.T) {
	sinkInvalid(t, `key column "region" is not a member of the pipeline's output`, nil, revenueTable(true), func(q *v1.StreamQuery) {
		q.Spec.Sink.KeyColumns = []string{"region"}
	})
}

func TestASinkTableInAnotherTenantsSchemaIsSinkInvalidAndNothingIsCreatedThere(t *testing.T) {
	h, _ := sinkInvalid(t, `schema regent_globex is not tenant 'acme''s: a query writes only into its tenant's schema, regent_acme`,
		nil, revenueTable(true), func(q *v1.StreamQuery) { q.Spec.Sink.Schema = "regent_globex" })
	for _, schema := range []string{"regent_globex", "regent_acme"} {
		if tables, err := h.broker.DB.Tables(h.ctx, schema); err != nil || len(tables) != 0 {
			t.Fatalf("schema %s holds %v (%v) after a refused table sink", schema, tables, err)
		}
	}
}

func TestAStatelessPipelineWhoseOutputIsUnknownBeforeItRunsCannotHaveATableSink(t *testing.T) {
	sinkInvalid(t, "give it a project that is a map literal", nil, revenueTable(true), func(q *v1.StreamQuery) {
		q.Spec.Pipeline = &v1.Pipeline{Filter: "payload.amount > 0"}
	})
}
