package db_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The seam itself, its arrangements for tests, and the schema migrations,
// which run before any broker code and hold the only DDL.
var seam = []string{"broker/db", "broker/db/dbtest", "broker/migrate"}

// The broker's layers, from the outside in: the HTTP handlers (queue,
// streams, admin, console, server, auth's middleware, httpx, and app,
// which wires them), the domain rules, and the seam. A domain package
// speaks neither HTTP nor PostgreSQL: a handler turns its typed errors
// into statuses, and broker/db runs its statements.
var domain = []string{
	"broker/backlog", "broker/batch", "broker/catalog", "broker/counters", "broker/flags", "broker/hotlist",
	"broker/ids", "broker/produce", "broker/queue/store", "broker/quota", "broker/retention", "broker/seal",
	"broker/segment", "broker/spool",
}

// imports lists each package of the module with what it imports, test
// harnesses aside: they set up and inspect databases.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`,
		"github.com/regent-mq/regent/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	pkgs := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], "github.com/regent-mq/regent/")
		if !strings.HasPrefix(pkg, "test/") {
			pkgs[pkg] = fields[1:]
		}
	}
	return pkgs
}

func importsPgx(imps []string) bool {
	return slices.ContainsFunc(imps, func(imp string) bool { return strings.HasPrefix(imp, "github.com/jackc/pgx/") })
}

func TestOnlyTheSeamImportsPgx(t *testing.T) {
	for pkg, imps := range imports(t) {
		if importsPgx(imps) && !slices.Contains(seam, pkg) {
			t.Errorf("%s imports pgx: its statements belong in broker/db", pkg)
		}
	}
}

func TestDomainPackagesImportNeitherNetHTTPNorPgx(t *testing.T) {
	pkgs := imports(t)
	for _, pkg := range domain {
		imps, ok := pkgs[pkg]
		if !ok {
			t.Errorf("%s is no package of the module: update the list of domain packages", pkg)
		}
		if slices.Contains(imps, "net/http") {
			t.Errorf("%s imports net/http: answering requests is the handlers' job", pkg)
		}
		if importsPgx(imps) {
			t.Errorf("%s imports pgx: its statements belong in broker/db", pkg)
		}
	}
}
