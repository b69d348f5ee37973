package migrate_test

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/regent-mq/regent/test/pgtest"
)

var update = flag.Bool("update", false, "rewrite schema.sql from a freshly migrated database (what `make generate` runs)")

func TestSchemaSQLIsTheMigratedSchema(t *testing.T) {
	t.Parallel()
	got := dumpSchema(t, pgtest.URL(t))
	if *update {
		if err := os.WriteFile("schema.sql", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatalf("%v: run `make generate`", err)
	}
	if string(want) != got {
		gotLines, wantLines := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		i := 0
		for i < len(gotLines) && i < len(wantLines) && gotLines[i] == wantLines[i] {
			i++
		}
		line := func(l []string) string {
			if i < len(l) {
				return l[i]
			}
			return "(end of file)"
		}
		t.Fatalf("schema.sql is not the schema the migrations and functions produce: run `make generate` and commit it.\n"+
			"First difference at line %d:\n  schema.sql: %s\n  migrated:   %s", i+1, line(wantLines), line(gotLines))
	}
}

// dumped are the lines of pg_dump's output that depend on the machine or the
// run rather than on the schema: the version header, the session settings,
// and the random key of the \restrict guard (PostgreSQL 15.14 and later).
var dumped = regexp.MustCompile(`^(-- Dumped (from|by) .*|-- PostgreSQL database dump( complete)?|SET .*|SELECT pg_catalog\.set_config\(.*|\\(un)?restrict .*)$`)

// dumpSchema is the normalised pg_dump --schema-only of Regent's two schemas
// in the database at url.
func dumpSchema(t *testing.T, url string) string {
	t.Helper()
	bin, err := pgtest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(bin, "pg_dump"), "--schema-only", "--no-owner", "--no-privileges",
		"-n", "queen", "-n", "queen_streams", "--dbname", url).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("pg_dump: %v: %s", err, ee.Stderr)
		}
		t.Fatalf("pg_dump: %v", err)
	}
	// Paragraphs, so that dropping a line leaves no comment frame or run of
	// blank lines behind it.
	var paragraphs []string
	for _, p := range strings.Split(elideBodies(strings.ReplaceAll(string(out), "\r\n", "\n")), "\n\n") {
		var keep []string
		content := false
		for _, l := range strings.Split(p, "\n") {
			if dumped.MatchString(l) {
				continue
			}
			keep = append(keep, l)
			content = content || (l != "" && l != "--")
		}
		if content {
			paragraphs = append(paragraphs, strings.Trim(strings.Join(keep, "\n"), "\n"))
		}
	}
	return strings.Join(paragraphs, "\n\n") + "\n"
}

// functionHead finds a function's name in pg_dump's CREATE FUNCTION line.
var functionHead = regexp.MustCompile(`(?m)^CREATE FUNCTION ([a-z_]+\.[a-z_0-9]+)\(`)

// bodyStart finds the dollar quote that opens a function's body: pg_dump
// picks one that the body does not hold, $$ or $_$ (a body naming $1).
var bodyStart = regexp.MustCompile(`AS (\$[a-z_]*\$)`)

// elideBodies replaces each function's body with the file it comes from:
// the text is that file's, written once, and schema.sql keeps what a change
// of signature, language or settings changes.
func elideBodies(dump string) string {
	var b strings.Builder
	for {
		m := functionHead.FindStringSubmatchIndex(dump)
		if m == nil {
			b.WriteString(dump)
			return b.String()
		}
		q := bodyStart.FindStringSubmatchIndex(dump[m[1]:])
		if q == nil {
			b.WriteString(dump)
			return b.String()
		}
		quote := dump[m[1]+q[2] : m[1]+q[3]]
		start := m[1] + q[0]
		end := strings.Index(dump[start+len("AS ")+len(quote):], "\n"+quote+";")
		if end < 0 {
			b.WriteString(dump)
			return b.String()
		}
		end += start + len("AS ") + len(quote) + len("\n"+quote+";")
		b.WriteString(dump[:start])
		b.WriteString("AS $$ -- the body of functions/" + dump[m[2]:m[3]] + ".sql\n$$;")
		dump = dump[end:]
	}
}
