package celldb

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SinkColumn is a column of a tenant's sink table.
type SinkColumn struct {
	Name string
	// Type is PostgreSQL's name of the column's type (format_type).
	Type string
	// Required: a row must give it a value (NOT NULL, and nothing fills
	// it).
	Required bool
}

// SinkInvalid is a table sink the database refuses
// (queen_streams.sink_table_check and tenant_schema): Message says why,
// for the StreamQuery's condition.
type SinkInvalid struct{ Message string }

func (e *SinkInvalid) Error() string { return e.Message }

// sinkInvalid turns the refusal the schema's functions raise
// (streams.sink_invalid) into a *SinkInvalid.
func sinkInvalid(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "P0001" && pe.Detail == "streams.sink_invalid" {
		return &SinkInvalid{Message: pe.Message}
	}
	return err
}

// SinkColumns returns the columns of the tenant's table, in order; none
// when the tenant's schema holds no such table. schema, when not empty,
// must be the tenant's (a *SinkInvalid otherwise).
func (d *DB) SinkColumns(ctx context.Context, tenant, schema, table string) ([]SinkColumn, error) {
	rows, err := d.pool.Query(ctx, `SELECT name, type, required
		FROM queen_streams.sink_table_columns(p_tenant => $1, p_schema => $2, p_table => $3)`,
		tenant, nullIfEmpty(schema), table)
	if err != nil {
		return nil, fmt.Errorf("read the columns of sink table %q of tenant %q: %w", table, tenant, sinkInvalid(err))
	}
	cols, err := pgx.CollectRows(rows, pgx.RowToStructByPos[SinkColumn])
	if err != nil {
		return nil, fmt.Errorf("read the columns of sink table %q of tenant %q: %w", table, tenant, sinkInvalid(err))
	}
	return cols, nil
}

// CreateSinkTable creates the tenant's table, in its schema, with the
// columns cols (Name and Type) and a primary key on keys (none when
// empty), unless a table of that name is there; it reports whether it
// created it.
func (d *DB) CreateSinkTable(ctx context.Context, tenant, table string, cols []SinkColumn, keys []string) (bool, error) {
	names := make([]string, len(cols))
	types := make([]string, len(cols))
	for i, c := range cols {
		names[i], types[i] = c.Name, c.Type
	}
	var created bool
	err := d.pool.QueryRow(ctx, `SELECT queen_streams.sink_table_create(p_tenant => $1, p_table => $2,
		p_columns => $3, p_types => $4, p_keys => $5)`, tenant, table, names, types, keys).Scan(&created)
	if err != nil {
		return false, fmt.Errorf("create sink table %q of tenant %q: %w", table, tenant, sinkInvalid(err))
	}
	return created, nil
}

// CheckSinkTable returns a *SinkInvalid when the tenant's query could not
// write table with these key columns in this mode (the broker refuses
// such a registration the same way), nil when it could.
func (d *DB) CheckSinkTable(ctx context.Context, tenant, schema, table string, keys []string, mode string) error {
	_, err := d.pool.Exec(ctx, `SELECT queen_streams.sink_table_check(p_tenant => $1, p_schema => $2, p_table => $3,
		p_keys => $4, p_mode => $5)`, tenant, nullIfEmpty(schema), table, keys, mode)
	if err != nil {
		var si *SinkInvalid
		if err = sinkInvalid(err); errors.As(err, &si) {
			return si
		}
		return fmt.Errorf("check sink table %q of tenant %q: %w", table, tenant, err)
	}
	return nil
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
