package migrate

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
)

// On Citus the same migrations and functions run on the coordinator, and
// then distribute places the tables (CITUS.md). A plain PostgreSQL never
// gets here: Up asks once whether the citus extension is in the database.
//
// The catalog is written at the rate of administration and read by every
// hot call, so it is a reference table, a copy on every node. The quota's
// budget and meter are written per lease, never per message: distributed by
// tenant, each a one-shard call. Everything else stays on the coordinator,
// as Citus local tables, until the tables keyed by a partition carry their
// shard key (CITUS.md, section 1).
var (
	referenceTables   = []string{"queen.queues", "queen.subscriptions", "queen.system_flags", "queen_streams.queries", "queen_streams.quota"}
	byTenantTables    = []string{"queen_streams.quota_budget", "queen_streams.quota_meter", "queen_streams.quota_refusals"}
	byTenantColocated = "queen_streams.quota_budget"
)

// citus reports whether the database has the citus extension, and refuses a
// Citus worker: DDL runs on the coordinator, which propagates it.
func citus(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var installed, coordinator bool
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')`).Scan(&installed)
	if err != nil {
		return false, fmt.Errorf("look for the citus extension: %w", err)
	}
	if !installed {
		return false, nil
	}
	if err := conn.QueryRow(ctx, `SELECT citus_is_coordinator()`).Scan(&coordinator); err != nil {
		return false, fmt.Errorf("ask Citus for this node's role: %w", err)
	}
	if !coordinator {
		return false, fmt.Errorf("this database is a Citus worker: migrate the coordinator's database instead, which the workers follow")
	}
	return true, nil
}

// distribute places each table that Citus does not place yet, so that it
// runs after every migration, and a table that a later release adds is
// placed on its first start. One statement each: Citus creates the shards
// in transactions of its own.
func distribute(ctx context.Context, conn *pgx.Conn, log *slog.Logger) error {
	placed := map[string]bool{}
	rows, err := conn.Query(ctx, `SELECT logicalrelid::regclass::text FROM pg_dist_partition`)
	if err != nil {
		return fmt.Errorf("read Citus's tables: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("read Citus's tables: %w", err)
	}
	for _, n := range names {
		placed[n] = true
	}
	place := func(table, sql string, args ...any) error {
		if placed[table] {
			return nil
		}
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			return fmt.Errorf("distribute %s on Citus: %w", table, err)
		}
		if log != nil {
			log.Info("placed table on Citus", "table", table, "how", sql)
		}
		placed[table] = true
		return nil
	}
	for _, t := range referenceTables {
		if err := place(t, `SELECT create_reference_table($1)`, t); err != nil {
			return err
		}
	}
	for _, t := range byTenantTables {
		with := byTenantColocated
		if t == byTenantColocated {
			with = "default"
		}
		if err := place(t, `SELECT create_distributed_table($1, 'tenant', colocate_with => $2)`, t, with); err != nil {
			return err
		}
	}
	return nil
}
