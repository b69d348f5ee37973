// Package tour holds the tests of a new user's first hour: the README's
// tour run as written against `make run` on a host without a network, and
// what `make help` shows.
package tour

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/regent-mq/regent/test/kubetest"
)

// The README's quick tour, pasted as written into a second shell while
// `make run` runs, works on a host whose only network is loopback with a
// default route through it: hack/tour-test.sh runs it on a copy of the
// checkout, in a network namespace of its own, and fails on any step that
// errors or shows other than what the README says.
func TestTheReadmeTourRunsAsWrittenOnAHostWithoutANetwork(t *testing.T) {
	tour(t)
}

// The same tour against `make run CITUS=1`, a coordinator and 2 workers:
// it shows what it shows on PostgreSQL, and the partitions' shards are the
// workers'.
func TestTheReadmeTourRunsAsWrittenOnCitus(t *testing.T) {
	tour(t, "REGENT_TOUR_CITUS=1")
}

func tour(t *testing.T, env ...string) {
	if testing.Short() {
		t.Skip("the whole stack takes a while")
	}
	if os.Geteuid() != 0 {
		t.Skip("a network namespace needs root")
	}
	cmd := exec.Command(filepath.Join(kubetest.RepoRoot(), "hack", "tour-test.sh"))
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/tour-test.sh: %v\n%s", err, out)
	}
}
