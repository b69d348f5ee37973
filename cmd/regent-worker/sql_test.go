package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sqlFile(t *testing.T, sql string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "q.sql")
	if err := os.WriteFile(file, []byte(sql), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// A .sql file is compiled to a pipeline whose hash is the one checked and
// printed, and its FROM is the source queue.
func TestCheckingASQLFileGivesTheHashOfThePipelineItCompilesTo(t *testing.T) {
	file := sqlFile(t, `SELECT payload->>'key' AS key_, count(*) AS n FROM clicks GROUP BY payload->>'key', TUMBLE(created_at, INTERVAL '1 minute')`)
	c, err := parseFlags([]string{"--check", file})
	if err != nil {
		t.Fatal(err)
	}
	if c.compiled == nil || c.prog.Hash != c.compiled.ConfigHash() {
		t.Fatalf("hash %s, compiled pipeline %+v", c.prog.Hash, c.compiled)
	}
	c, err = parseFlags([]string{"--pipeline", file, "--query", "q", "--sink", "out"})
	if err != nil || c.Source != "clicks" {
		t.Fatalf("source %q (%v), want the FROM, clicks", c.Source, err)
	}
}

func TestASQLFileThatReadsAnotherQueueThanSourceIsRefused(t *testing.T) {
	file := sqlFile(t, `SELECT * FROM clicks`)
	if _, err := parseFlags([]string{"--pipeline", file, "--source", "orders", "--query", "q", "--sink", "out"}); err == nil ||
		!strings.Contains(err.Error(), `reads FROM "clicks", not --source "orders"`) {
		t.Fatalf("error %v", err)
	}
}

func TestASQLFileOutsideTheSubsetIsRefusedByCheck(t *testing.T) {
	if _, err := parseFlags([]string{"--check", sqlFile(t, `SELECT * FROM clicks LIMIT 1`)}); err == nil || !strings.Contains(err.Error(), "LIMIT/OFFSET: not supported") {
		t.Fatalf("error %v", err)
	}
}
