package dbtest

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ForgetLatestMigration deletes the record of the latest migration applied
// and returns its version: the database then reads as one that a newer
// broker's migration has not reached yet.
func (d *DB) ForgetLatestMigration(ctx context.Context) (int, error) {
	var v int
	err := d.pool.QueryRow(ctx, `DELETE FROM public.regent_schema_migrations
		 WHERE version = (SELECT max(version) FROM public.regent_schema_migrations) RETURNING version`).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("forget the latest migration: %w", err)
	}
	return v, nil
}

// ForgetMigrations drops the record of the migrations altogether, as a
// database never migrated lacks it.
func (d *DB) ForgetMigrations(ctx context.Context) error {
	if _, err := d.pool.Exec(ctx, `DROP TABLE public.regent_schema_migrations CASCADE`); err != nil {
		return fmt.Errorf("drop the record of the migrations: %w", err)
	}
	return nil
}

// Migrations lists the versions of the migrations recorded as applied, in
// the order they were.
func (d *DB) Migrations(ctx context.Context) ([]int, error) {
	rows, err := d.pool.Query(ctx, `SELECT version FROM public.regent_schema_migrations ORDER BY applied_at, version`)
	if err != nil {
		return nil, fmt.Errorf("read the migrations applied: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("read the migrations applied: %w", err)
	}
	return versions, nil
}
