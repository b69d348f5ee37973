package dbtest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// TableColumn is a column of a table a test arranges.
type TableColumn struct {
	Name, Type string
	NotNull    bool
}

// TenantSchema is the schema of a tenant's table sinks
// (queen_streams.tenant_schema).
func (d *DB) TenantSchema(ctx context.Context, tenant string) (string, error) {
	var s string
	if err := d.pool.QueryRow(ctx, `SELECT queen_streams.tenant_schema($1, NULL)`, tenant).Scan(&s); err != nil {
		return "", fmt.Errorf("the schema of tenant %q: %w", tenant, err)
	}
	return s, nil
}

// CreateTable creates table in the tenant's schema (made when absent), as
// a user would make a sink table by hand: with the columns, and a unique
// index on unique (none when empty).
func (d *DB) CreateTable(ctx context.Context, tenant, table string, cols []TableColumn, unique []string) error {
	schema, err := d.TenantSchema(ctx, tenant)
	if err != nil {
		return err
	}
	name := pgx.Identifier{schema, table}.Sanitize()
	defs := make([]string, len(cols))
	for i, c := range cols {
		defs[i] = pgx.Identifier{c.Name}.Sanitize() + " " + c.Type
		if c.NotNull {
			defs[i] += " NOT NULL"
		}
	}
	if len(unique) > 0 {
		keys := make([]string, len(unique))
		for i, k := range unique {
			keys[i] = pgx.Identifier{k}.Sanitize()
		}
		defs = append(defs, "UNIQUE ("+strings.Join(keys, ", ")+")")
	}
	sql := "CREATE SCHEMA IF NOT EXISTS " + pgx.Identifier{schema}.Sanitize() + "; CREATE TABLE " + name + " (" + strings.Join(defs, ", ") + ")"
	if _, err := d.pool.Exec(ctx, sql); err != nil {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	return nil
}

// TableRows reads every row of the tenant's table, each as the JSON
// object of its columns (to_jsonb), sorted.
func (d *DB) TableRows(ctx context.Context, tenant, table string) ([]string, error) {
	schema, err := d.TenantSchema(ctx, tenant)
	if err != nil {
		return nil, err
	}
	name := pgx.Identifier{schema, table}.Sanitize()
	rows, err := d.pool.Query(ctx, `SELECT to_jsonb(t)::text FROM `+name+` t ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("read table %s: %w", name, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read table %s: %w", name, err)
	}
	return out, nil
}

// Tables lists the tables of a schema, sorted.
func (d *DB) Tables(ctx context.Context, schema string) ([]string, error) {
	rows, err := d.pool.Query(ctx, `SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		 WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') ORDER BY 1`, schema)
	if err != nil {
		return nil, fmt.Errorf("list the tables of schema %q: %w", schema, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list the tables of schema %q: %w", schema, err)
	}
	return out, nil
}

// SinkWrite is what a query's cycles last wrote to its table sink.
type SinkWrite struct {
	Rows      int64      // rows written, over every cycle and partition
	WrittenAt *time.Time // the last write; nil: none
}

// SinkWrites reads what the query's cycles wrote to its table sink.
func (d *DB) SinkWrites(ctx context.Context, queryID string) (SinkWrite, error) {
	var w SinkWrite
	err := d.pool.QueryRow(ctx, `SELECT COALESCE(sum(rows), 0)::bigint, max(written_at)
		  FROM queen_streams.sink_writes WHERE query_id = $1`, queryID).Scan(&w.Rows, &w.WrittenAt)
	if err != nil {
		return SinkWrite{}, fmt.Errorf("read the sink writes of query %s: %w", queryID, err)
	}
	return w, nil
}
