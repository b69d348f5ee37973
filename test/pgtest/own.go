package pgtest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// throwaway are the settings of test clusters: durability is worthless for a
// database that dies with the test.
var throwaway = []string{"fsync=off", "synchronous_commit=off", "full_page_writes=off"}

// Throwaway returns the settings of test clusters, for harnesses that start
// clusters of their own.
func Throwaway() []string { return slices.Clone(throwaway) }

// Own starts a throwaway cluster for this test alone, for tests that stop,
// restart or fail over PostgreSQL and so cannot share the binary's cluster.
// It is stopped and removed when the test ends. Its "postgres" database
// (c.URL("postgres")) is empty; a broker started on it migrates it.
func Own(t testing.TB, settings ...string) *Cluster {
	t.Helper()
	dir, err := ScratchDir("regent-pgtest-own-")
	if err != nil {
		t.Fatalf("pgtest: make cluster directory: %v", err)
	}
	c, err := StartCluster(filepath.Join(dir, "data"), 0, slices.Concat(throwaway, settings)...)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		c.Stop()
		os.RemoveAll(dir)
	})
	return c
}
