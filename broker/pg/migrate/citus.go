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
// tenant, each a one-shard call. The tables keyed by a partition are
// distributed by the partition id (CITUS.md, section 1). The per-minute
// analytics stay on the coordinator.
var (
	referenceTables = []string{"queen.queues", "queen.subscriptions", "queen.system_flags", "queen_streams.queries",
		"queen_streams.quota", "queen_streams.savepoints"}
	// byPartition are distributed by partition id and co-located with
	// queen.partitions: every row a hot statement touches lives on the
	// shard of its partition. The first is the group's anchor.
	byPartition = []struct{ table, column string }{
		{"queen.partitions", "id"}, {"queen.cursors", "partition_id"}, {"queen.log_segments", "partition_id"},
		{"queen.push_dedup", "partition_id"}, {"queen.dead_letters", "partition_id"}, {"queen.traces", "partition_id"},
		{"queen.trace_names", "partition_id"},
		{"queen_streams.state", "partition_id"}, {"queen_streams.state_rows", "partition_id"},
		{"queen_streams.sink_writes", "partition_id"}, {"queen_streams.savepoint_cursors", "partition_id"},
		{"queen_streams.savepoint_state", "partition_id"},
	}
	// delegated are the hot functions with a partition id among their
	// arguments (arg, as Citus numbers them): Citus sends a call of one, in
	// autocommit, whole to the worker that holds that partition's shard.
	delegated = []struct{ fn, arg string }{
		{"queen.log_push_v2(uuid, uuid[], integer[], bytea[], bigint[], text[], timestamptz[], timestamptz[], integer[], text[], uuid[], integer)", "$1"},
		{"queen.ack_cursor(text, uuid, text, uuid, text[])", "$2"},
		{"queen.ack_v2(uuid, text, uuid[], text[], text[], text[], uuid[], text[], integer[], uuid[], bytea[], bigint[], timestamptz[])", "$1"},
		{"queen.pop_v2(uuid, text, uuid, uuid[], text, integer, integer, uuid, text, bigint)", "$1"},
		{"queen_streams.cycle_v7(uuid, queen_streams.cycle_request, jsonb)", "$1"},
		{"queen_streams.cycle_next_v2(uuid, queen_streams.cycle_request, jsonb, uuid, integer, bigint)", "$1"},
		// Retention's work on the partitions of one shard (CITUS.md, section 3).
		{"queen.raise_floors_v2(uuid, uuid[], bigint[])", "$1"}, {"queen.drop_below_floors_v2(uuid, uuid[], integer)", "$1"},
		{"queen.trace_add(uuid, text, text, uuid, text, text, jsonb, text, text[])", "$1"},
	}
	byTenantTables    = []string{"queen_streams.quota_budget", "queen_streams.quota_meter", "queen_streams.quota_refusals"}
	byTenantColocated = "queen_streams.quota_budget"
	// traceNamesKey is the foreign key from trace_names to traces by trace
	// id alone, kept one release on PostgreSQL for the previous release's
	// brokers (migration 0019), which Citus cannot hold (unfit) and
	// distribute does not put back: the key on (partition_id, trace_id)
	// cascades in its place.
	traceNamesKey = "trace_names_trace_id_fkey"
	// unfit are the constraints Citus cannot hold once the tables are
	// distributed by partition id (a unique key must contain it, and a
	// foreign key between distributed tables must join on it), with what
	// takes their place. The partition name's uniqueness is kept by
	// queen.resolve_partition_v2, which creates partitions under the queue
	// row's lock.
	unfit = []string{
		`ALTER TABLE queen.partitions DROP CONSTRAINT IF EXISTS partitions_queue_id_name_key`,
		`CREATE INDEX IF NOT EXISTS partitions_queue_id_name ON queen.partitions (queue_id, name)`,
		`ALTER TABLE queen.trace_names DROP CONSTRAINT IF EXISTS ` + traceNamesKey,
		`ALTER TABLE queen.traces DROP CONSTRAINT IF EXISTS traces_pkey`,
		`ALTER TABLE queen.traces ADD PRIMARY KEY (partition_id, id)`,
		// A plain database restored here may hold names that the previous
		// release's brokers wrote without their partition id (migration
		// 0019): they take it from their trace before it joins the key.
		// Only while the table is not placed yet: Citus plans no join of
		// the two tables but on the partition id.
		`DO $$ BEGIN
		    IF NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'queen.trace_names'::regclass) THEN
		        UPDATE queen.trace_names n SET partition_id = t.partition_id FROM queen.traces t
		         WHERE n.partition_id IS NULL AND t.id = n.trace_id;
		    END IF;
		END $$`,
		`ALTER TABLE queen.trace_names ALTER COLUMN partition_id SET NOT NULL`,
		`ALTER TABLE queen.trace_names DROP CONSTRAINT IF EXISTS trace_names_pkey`,
		`ALTER TABLE queen.trace_names ADD PRIMARY KEY (tenant, name, trace_id, partition_id)`,
		// What only the previous release's brokers need, which a trace
		// would otherwise write for nothing: traces' second key on
		// (partition_id, id), and trace_names' index by trace id alone.
		`ALTER TABLE queen.traces DROP CONSTRAINT IF EXISTS traces_partition_id_id_key`,
		`DROP INDEX IF EXISTS queen.trace_names_trace_idx`,
	}
)

// OnCitus reports whether the database has the citus extension: the mode
// in which migrate places the tables (CITUS.md), and in which the broker
// sends its hot calls to the nodes.
func OnCitus(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (bool, error) {
	var installed bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')`).Scan(&installed); err != nil {
		return false, fmt.Errorf("look for the citus extension: %w", err)
	}
	return installed, nil
}

// citus reports whether the database has the citus extension, and refuses a
// Citus worker: DDL runs on the coordinator, which propagates it.
func citus(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var coordinator bool
	installed, err := OnCitus(ctx, conn)
	if err != nil || !installed {
		return false, err
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
	// What places each table, in order: the reference tables first, which
	// the distributed ones' foreign keys point at.
	type placement struct {
		table, sql string
		args       []any
	}
	var todo []placement
	add := func(table, sql string, args ...any) {
		if !placed[table] {
			todo = append(todo, placement{table, sql, args})
		}
	}
	for _, t := range referenceTables {
		add(t, `SELECT create_reference_table($1)`, t)
	}
	for i, t := range byPartition {
		with := byPartition[0].table
		if i == 0 {
			with = "none"
		}
		add(t.table, `SELECT create_distributed_table($1, $2, colocate_with => $3)`, t.table, t.column, with)
	}
	for _, t := range byTenantTables {
		with := byTenantColocated
		if t == byTenantColocated {
			with = "default"
		}
		add(t, `SELECT create_distributed_table($1, 'tenant', colocate_with => $2)`, t, with)
	}
	if len(todo) == 0 {
		return nil
	}
	// Foreign keys decide how Citus may place a table (a local table that
	// references a reference table becomes a Citus local table, which can
	// no longer be distributed), so they are taken off, the tables placed,
	// and the keys put back.
	rows, err = conn.Query(ctx, `SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
		  FROM pg_constraint
		 WHERE contype = 'f' AND connamespace IN ('queen'::regnamespace, 'queen_streams'::regnamespace)`)
	if err != nil {
		return fmt.Errorf("read the foreign keys: %w", err)
	}
	type fkey struct{ Table, Name, Def string }
	fkeys, err := pgx.CollectRows(rows, pgx.RowToStructByPos[fkey])
	if err != nil {
		return fmt.Errorf("read the foreign keys: %w", err)
	}
	for _, k := range fkeys {
		if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER TABLE %s DROP CONSTRAINT %s", k.Table, pgx.Identifier{k.Name}.Sanitize())); err != nil {
			return fmt.Errorf("take foreign key %s off for Citus: %w", k.Name, err)
		}
	}
	for _, sql := range unfit {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("fit the schema to Citus: %s: %w", sql, err)
		}
	}
	for _, p := range todo {
		if _, err := conn.Exec(ctx, p.sql, p.args...); err != nil {
			return fmt.Errorf("distribute %s on Citus: %w", p.table, err)
		}
		if log != nil {
			log.Info("placed table on Citus", "table", p.table, "how", p.sql)
		}
	}
	for _, k := range fkeys {
		if k.Name == traceNamesKey {
			continue // see unfit
		}
		if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER TABLE %s ADD CONSTRAINT %s %s", k.Table, pgx.Identifier{k.Name}.Sanitize(), k.Def)); err != nil {
			return fmt.Errorf("put foreign key %s back on Citus: %w", k.Name, err)
		}
	}
	return nil
}

// fitFunctions fits the functions to Citus, after they are applied (a
// function's file sets its plan mode again). It lets Citus plan the
// statements of the functions that force generic plans on PostgreSQL:
// Citus can make no generic plan of a join whose distribution column is a
// parameter ("could not create distributed plan"), and plans such a
// statement at each call instead. It sets the database's multi-shard mode,
// reporting whether it did (the sessions open before then do not have it),
// and distributes the delegated functions.
func fitFunctions(ctx context.Context, conn *pgx.Conn) (setMode bool, err error) {
	_, err = conn.Exec(ctx, `DO $$
		DECLARE f regprocedure;
		BEGIN
		    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
		              WHERE p.pronamespace IN ('queen'::regnamespace, 'queen_streams'::regnamespace)
		                AND 'plan_cache_mode=force_generic_plan' = ANY (p.proconfig) LOOP
		        EXECUTE format('ALTER FUNCTION %s RESET plan_cache_mode', f);
		    END LOOP;
		END $$`)
	if err != nil {
		return false, fmt.Errorf("fit the functions' plans to Citus: %w", err)
	}
	// A transaction that writes the catalog (a reference table) after a
	// statement over several shards, such as a registration or a queue's
	// deletion, is refused unless Citus ran that statement over one
	// connection per node. Regent's multi-shard writes are administration,
	// never a message's: sequential costs them little. Set once, not at
	// every start: it is DDL, which Citus sends to every node.
	err = conn.QueryRow(ctx, `SELECT NOT EXISTS (SELECT FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase
		                    WHERE d.datname = current_database() AND s.setrole = 0
		                      AND 'citus.multi_shard_modify_mode=sequential' = ANY (s.setconfig))`).Scan(&setMode)
	if err == nil && setMode {
		_, err = conn.Exec(ctx, `DO $$ BEGIN
		    EXECUTE format('ALTER DATABASE %I SET citus.multi_shard_modify_mode TO sequential', current_database());
		END $$`)
	}
	if err != nil {
		return false, fmt.Errorf("set Citus's multi-shard mode: %w", err)
	}
	for _, f := range delegated {
		_, err := conn.Exec(ctx, `SELECT create_distributed_function($1::regprocedure, $2, colocate_with => 'queen.partitions')
			 WHERE NOT EXISTS (SELECT FROM pg_dist_object o
			                    WHERE o.classid = 'pg_proc'::regclass AND o.objid = $1::regprocedure
			                      AND o.distribution_argument_index IS NOT NULL)`, f.fn, f.arg)
		if err != nil {
			return setMode, fmt.Errorf("distribute function %s on Citus: %w", f.fn, err)
		}
	}
	return setMode, nil
}
