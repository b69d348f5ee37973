package db_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The seam itself, its arrangements for tests, the schema migrations, which
// run before any broker code and hold the only DDL, and the operator's cell
// database. The layers are stated in broker/doc.go.
var seam = []string{"broker/db", "broker/db/dbtest", "broker/migrate", "broker/celldb"}

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

// deps lists the packages of the module that pkg links.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	var mine []string
	for line := range strings.Lines(string(out)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "github.com/regent-mq/regent/"); ok {
			mine = append(mine, p)
		}
	}
	return mine
}

func TestTheOperatorLinksNoneOfTheBrokersInternals(t *testing.T) {
	allowed := []string{"broker/auth", "broker/config", "broker/celldb", "broker/streams/wire"}
	for _, p := range deps(t, "github.com/regent-mq/regent/cmd/operator") {
		if strings.HasPrefix(p, "broker/") && !slices.Contains(allowed, p) {
			t.Errorf("the operator links %s: it reaches the cell database through broker/celldb alone, and speaks the streams routes' JSON through broker/streams/wire", p)
		}
	}
}

func TestTheStreamsWireImportsNothingOfTheBroker(t *testing.T) {
	for _, p := range deps(t, "github.com/regent-mq/regent/broker/streams/wire") {
		if p != "broker/streams/wire" {
			t.Errorf("broker/streams/wire links %s: regent-worker shares it without the broker", p)
		}
	}
}
