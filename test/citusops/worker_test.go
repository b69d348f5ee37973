package citusops

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/pg/migrate"
	"github.com/regent-mq/regent/test/citustest"
)

// The chart's database URL must be the coordinator's: migrate, given a
// worker's, refuses it and says so, and leaves the worker's database
// without Regent's schema.
func TestMigrateRefusesAWorkersURLAndNamesTheCoordinator(t *testing.T) {
	ctx := context.Background()
	c := citustest.New(t, 1)
	worker := c.Workers[0].URL(citustest.Database).String()
	pool, err := pgxpool.New(ctx, worker)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	_, err = migrate.Up(ctx, pool, nil)
	if err == nil || !strings.Contains(err.Error(), "Citus worker") || !strings.Contains(err.Error(), "coordinator") {
		t.Fatalf("migrate on a worker's database = %v, want a refusal that names the coordinator", err)
	}
	var schemas int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname IN ('queen', 'queen_streams')`).Scan(&schemas); err != nil {
		t.Fatal(err)
	}
	if schemas != 0 {
		t.Errorf("the worker's database has %d of Regent's schemas after the refusal", schemas)
	}
}
