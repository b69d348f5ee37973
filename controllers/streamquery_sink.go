package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/api/streams/wire"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/pipeline"
)

// sinkInvalid is a spec.sink the query cannot write: SinkInvalid, and
// nothing registered.
type sinkInvalid struct{ msg string }

func (e *sinkInvalid) Error() string { return e.msg }

func invalidSink(format string, args ...any) error {
	return &sinkInvalid{msg: "spec.sink: " + fmt.Sprintf(format, args...)}
}

// sinkTable readies spec.sink for the registration: the table created
// when it is absent and createTable says so, its columns checked against
// the pipeline's output, and the broker's own rules
// (queen_streams.sink_table_check) checked before the broker is asked. It
// returns what the registration carries: nil without spec.sink, which
// removes a table sink the query had.
func (r *StreamQueryReconciler) sinkTable(ctx context.Context, s *step) (*wire.SinkTable, error) {
	q, spec := s.q, s.q.Spec.Sink
	if spec == nil {
		return nil, nil
	}
	p := specPipeline(q)
	if p == nil {
		return nil, invalidSink("a table sink holds a pipeline's output: set spec.pipeline or spec.sql")
	}
	prog, err := pipeline.Compile(*p)
	if err != nil {
		return nil, fmt.Errorf("compile the pipeline of StreamQuery %s/%s: %w", q.Namespace, q.Name, err)
	}
	out, known := prog.Columns()
	if !known {
		return nil, invalidSink("the pipeline's output columns are known only once it runs: give it a project that is a map literal, {'column': expression, ...}")
	}
	mode := spec.Mode
	if mode == "" {
		mode = v1.TableSinkUpsert
	}
	cols, err := r.DB.SinkColumns(ctx, s.tenant, spec.Schema, spec.Table)
	if err != nil {
		return nil, asSinkInvalid(err)
	}
	if len(cols) == 0 && spec.CreateTable {
		if cols, err = r.createSinkTable(ctx, s, out, mode); err != nil {
			return nil, err
		}
	}
	if len(cols) > 0 {
		if err := fits(out, cols, spec.KeyColumns); err != nil {
			return nil, err
		}
	}
	if err := r.DB.CheckSinkTable(ctx, s.tenant, spec.Schema, spec.Table, spec.KeyColumns, string(mode)); err != nil {
		return nil, asSinkInvalid(err)
	}
	return &wire.SinkTable{Schema: spec.Schema, Table: spec.Table, KeyColumns: spec.KeyColumns, Mode: string(mode)}, nil
}

// createSinkTable creates spec.sink's table: a column per output member,
// typed after it, and in mode upsert a primary key on the key columns.
func (r *StreamQueryReconciler) createSinkTable(ctx context.Context, s *step, out []pipeline.Column, mode v1.TableSinkMode) ([]celldb.SinkColumn, error) {
	spec := s.q.Spec.Sink
	for _, k := range spec.KeyColumns {
		if !slices.ContainsFunc(out, func(c pipeline.Column) bool { return c.Name == k }) {
			return nil, invalidSink("key column %q is not a member of the pipeline's output (%s)", k, names(out))
		}
	}
	cols := make([]celldb.SinkColumn, len(out))
	for i, c := range out {
		cols[i] = celldb.SinkColumn{Name: c.Name, Type: columnTypes[c.Kind].create}
	}
	var keys []string
	if mode == v1.TableSinkUpsert {
		keys = spec.KeyColumns
	}
	created, err := r.DB.CreateSinkTable(ctx, s.tenant, spec.Table, cols, keys)
	if err != nil {
		return nil, asSinkInvalid(err)
	}
	if created {
		r.event(s.q, corev1.EventTypeNormal, "TableCreated", "CreateTable", fmt.Sprintf(
			"created table %q in tenant %q's schema for the query's output (createTable)", spec.Table, s.tenant))
	}
	return r.DB.SinkColumns(ctx, s.tenant, "", spec.Table)
}

// columnTypes maps a member of the pipeline's output to the column type
// createTable gives it, and the types of an existing column that hold it
// (format_type's names, without a type modifier). A dyn member fits any
// column, and is checked when written.
var columnTypes = map[string]struct {
	create string
	fit    []string
}{
	pipeline.KindInt:       {"bigint", []string{"bigint", "numeric", "double precision", "jsonb", "json"}},
	pipeline.KindUint:      {"bigint", []string{"bigint", "numeric", "double precision", "jsonb", "json"}},
	pipeline.KindDouble:    {"double precision", []string{"double precision", "numeric", "jsonb", "json"}},
	pipeline.KindString:    {"text", []string{"text", "character varying", "jsonb", "json"}},
	pipeline.KindBool:      {"boolean", []string{"boolean", "jsonb", "json"}},
	pipeline.KindTimestamp: {"timestamp with time zone", []string{"timestamp with time zone", "text", "character varying"}},
	pipeline.KindDyn:       {"jsonb", nil},
}

// fits says how the table's columns do not fit the pipeline's output: each
// member needs a column of its name and a type that holds it, each key
// column is a member, and a column the rows never give a value must not
// need one.
func fits(out []pipeline.Column, cols []celldb.SinkColumn, keys []string) error {
	var why []string
	for _, o := range out {
		i := slices.IndexFunc(cols, func(c celldb.SinkColumn) bool { return c.Name == o.Name })
		if i < 0 {
			why = append(why, fmt.Sprintf("the table has no column %q", o.Name))
			continue
		}
		typ, _, _ := strings.Cut(cols[i].Type, "(")
		if fit := columnTypes[o.Kind].fit; fit != nil && !slices.Contains(fit, typ) {
			why = append(why, fmt.Sprintf("column %q is %s, which cannot hold the pipeline's %s (it takes %s)", o.Name, cols[i].Type,
				o.Kind, strings.Join(fit, ", ")))
		}
	}
	for _, k := range keys {
		if !slices.ContainsFunc(out, func(c pipeline.Column) bool { return c.Name == k }) {
			why = append(why, fmt.Sprintf("key column %q is not a member of the pipeline's output", k))
		}
	}
	for _, c := range cols {
		if c.Required && !slices.ContainsFunc(out, func(o pipeline.Column) bool { return o.Name == c.Name }) {
			why = append(why, fmt.Sprintf("column %q is NOT NULL with no default, and the pipeline's output has no %q", c.Name, c.Name))
		}
	}
	if why != nil {
		return invalidSink("the table does not fit the pipeline's output (%s): %s", names(out), strings.Join(why, "; "))
	}
	return nil
}

func names(out []pipeline.Column) string {
	s := make([]string, len(out))
	for i, c := range out {
		s[i] = c.Name + " " + c.Kind
	}
	return strings.Join(s, ", ")
}

// asSinkInvalid turns the database's refusal of the table sink into a
// *sinkInvalid; any other error stays as it is, for a retry.
func asSinkInvalid(err error) error {
	var si *celldb.SinkInvalid
	if errors.As(err, &si) {
		return invalidSink("%s", si.Message)
	}
	return err
}

// sinkInvalidOrErr reports a spec.sink the query cannot write, as
// pipelineInvalid reports a pipeline, and looks again at the next resync:
// the table may be mended without a change to the spec. Any other error
// is retried.
func (r *StreamQueryReconciler) sinkInvalidOrErr(ctx context.Context, s *step, err error) (ctrl.Result, error) {
	var si *sinkInvalid
	if !errors.As(err, &si) {
		return ctrl.Result{}, err
	}
	r.notReady(s.q, v1.ReasonSinkInvalid, si.msg)
	if err := r.writeStatus(ctx, s); err != nil {
		return conflictOr(err)
	}
	observeQuery(s.q)
	return ctrl.Result{RequeueAfter: r.resync()}, nil
}
