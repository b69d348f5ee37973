package db_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The layers are the folders of broker/ (see broker/doc.go): broker/pg is
// the seam, the only code that speaks PostgreSQL, and broker/domain holds
// the rules, which speak neither HTTP nor PostgreSQL.
func inSeam(pkg string) bool   { return strings.HasPrefix(pkg, "broker/pg/") }
func inDomain(pkg string) bool { return strings.HasPrefix(pkg, "broker/domain/") }

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
		if importsPgx(imps) && !inSeam(pkg) {
			t.Errorf("%s imports pgx: its statements belong in broker/pg/db", pkg)
		}
	}
}

func TestDomainPackagesImportNeitherNetHTTPNorPgx(t *testing.T) {
	domain := 0
	for pkg, imps := range imports(t) {
		if !inDomain(pkg) {
			continue
		}
		domain++
		if slices.Contains(imps, "net/http") {
			t.Errorf("%s imports net/http: answering requests is the handlers' job", pkg)
		}
		if importsPgx(imps) {
			t.Errorf("%s imports pgx: its statements belong in broker/pg/db", pkg)
		}
	}
	if domain == 0 {
		t.Error("no package under broker/domain: the layout of broker/ changed, update this test and broker/doc.go")
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
	allowed := []string{"broker/api/auth", "broker/config", "broker/pg/celldb", "broker/api/streams/wire"}
	for _, p := range deps(t, "github.com/regent-mq/regent/cmd/operator") {
		if strings.HasPrefix(p, "broker/") && !slices.Contains(allowed, p) {
			t.Errorf("the operator links %s: it reaches the cell database through broker/pg/celldb alone, and speaks the streams routes' JSON through broker/api/streams/wire", p)
		}
	}
}

func TestTheStreamsWireImportsNothingOfTheBroker(t *testing.T) {
	for _, p := range deps(t, "github.com/regent-mq/regent/broker/api/streams/wire") {
		if p != "broker/api/streams/wire" {
			t.Errorf("broker/api/streams/wire links %s: regent-worker shares it without the broker", p)
		}
	}
}
