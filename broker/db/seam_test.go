package db_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// stillOwnSQL are the packages that still talk to PostgreSQL themselves,
// and move behind broker/db family by family (issue 25). The list only
// shrinks: a package that no longer imports pgx must leave it.
var stillOwnSQL = []string{
	"broker/log",
	"broker/pg",
}

// The seam itself, and the schema migrations, which run before any broker
// code and hold the only DDL.
var seam = []string{"broker/db", "broker/migrate"}

func TestOnlyTheSeamImportsPgx(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`,
		"github.com/regent-mq/regent/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var importers []string
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], "github.com/regent-mq/regent/")
		if strings.HasPrefix(pkg, "test/") {
			continue // test harnesses set up and inspect databases
		}
		if slices.ContainsFunc(fields[1:], func(imp string) bool { return strings.HasPrefix(imp, "github.com/jackc/pgx/") }) {
			importers = append(importers, pkg)
		}
	}
	for _, pkg := range importers {
		if !slices.Contains(seam, pkg) && !slices.Contains(stillOwnSQL, pkg) {
			t.Errorf("%s imports pgx: its statements belong in broker/db", pkg)
		}
	}
	for _, pkg := range stillOwnSQL {
		if !slices.Contains(importers, pkg) {
			t.Errorf("%s no longer imports pgx: take it off stillOwnSQL", pkg)
		}
	}
}
