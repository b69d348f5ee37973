package db_test

import (
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	tableDDL     = regexp.MustCompile(`(?m)^CREATE TABLE (queen|queen_streams)\.(\w+) \(`)
	qualified    = regexp.MustCompile(`\b(queen|queen_streams)\.(\w+)\b`)
	cursorsWrite = regexp.MustCompile(`(?i)\b(UPDATE|INSERT\s+INTO|DELETE\s+FROM)\s+queen\.cursors\b`)
)

// TestOnlyTheSeamNamesTables holds what the pgx guard cannot see: a package
// that sends SQL through another's connection still names the tables, and
// the cursors, which carry the lease and ack rules (queen.lease_release_v2,
// queen.ack_verdict), are written by those rules alone.
func TestOnlyTheSeamNamesTables(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	schema, err := os.ReadFile(filepath.Join(root, "broker", "pg", "migrate", "schema.sql"))
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string]bool{}
	for _, m := range tableDDL.FindAllStringSubmatch(string(schema), -1) {
		tables[m[1]+"."+m[2]] = true
	}
	if !tables["queen.cursors"] {
		t.Fatalf("schema.sql creates no queen.cursors: the scan of its tables is broken")
	}

	naming, writing := map[string]string{}, map[string]string{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			// The seam, the migrations, and the test harnesses, which set
			// up and inspect databases.
			if rel == "broker/pg/db" || rel == "broker/pg/migrate" || rel == "test" || rel != "." && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		for _, text := range stringLiterals(t, p) {
			for _, m := range qualified.FindAllStringSubmatch(text, -1) {
				if tables[m[0]] && naming[pkg] == "" {
					naming[pkg] = rel + ": " + m[0]
				}
			}
			if cursorsWrite.MatchString(text) && writing[pkg] == "" {
				writing[pkg] = rel
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for pkg, where := range naming {
		t.Errorf("%s names a table (%s): its statements belong in broker/pg/db", pkg, where)
	}
	for pkg, where := range writing {
		t.Errorf("%s writes queen.cursors (%s): a cursor changes only through broker/pg/db", pkg, where)
	}
}

// stringLiterals returns the values of the string literals of a Go file.
func stringLiterals(t *testing.T, path string) []string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s scanner.Scanner
	fset := token.NewFileSet()
	s.Init(fset.AddFile(path, -1, len(src)), src, nil, 0)
	var out []string
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			return out
		}
		if tok == token.STRING {
			text, err := strconv.Unquote(lit)
			if err != nil {
				t.Fatalf("%s: string literal %s: %v", path, lit, err)
			}
			out = append(out, text)
		}
	}
}
