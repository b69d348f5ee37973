// Package citustest starts a throwaway Citus cluster on loopback: a
// coordinator and workers, each a PostgreSQL server started by pgtest with
// Citus preloaded (as the postgres system user when running as root), the
// citus extension created in one database on every node, and the workers
// registered with the coordinator, for running Regent past one primary;
// `make deps` builds Citus into the installed PostgreSQL
// (hack/citus.sh).
package citustest

import (
	"os"
	"testing"

	"github.com/regent-mq/regent/test/pgtest"
)

// Database is the database the citus extension is created in, on every node.
const Database = pgtest.CitusDatabase

// New starts a cluster of a coordinator and the given number of workers for
// the test, stopped and removed when it ends, with the test clusters'
// settings and then settings (a later one wins). Without Citus installed it
// skips the test, unless REGENT_REQUIRE_CITUS is set (as in CI, where a
// missing Citus is a broken toolchain, not a reason to test less).
func New(t testing.TB, workers int, settings ...string) *pgtest.Citus {
	t.Helper()
	ok, err := pgtest.CitusInstalled()
	if err != nil {
		t.Fatalf("citustest: %v", err)
	}
	if !ok {
		msg := "citustest: Citus is not installed in this PostgreSQL (no citus.so; `make deps` builds it)"
		if os.Getenv("REGENT_REQUIRE_CITUS") != "" {
			t.Fatal(msg + ", and REGENT_REQUIRE_CITUS is set")
		}
		t.Skip(msg)
	}
	dir, err := pgtest.ScratchDir("regent-pgtest-citus-")
	if err != nil {
		t.Fatalf("citustest: make cluster directory: %v", err)
	}
	c, err := pgtest.StartCitus(dir, workers, settings...)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("citustest: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}
