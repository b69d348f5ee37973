package tour

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/regent-mq/regent/test/kubetest"
)

// `make help` starts every target's description in one column, and wraps
// a long one into that column within 100 columns.
func TestMakeHelpAlignsEveryDescriptionInOneColumn(t *testing.T) {
	cmd := exec.Command("make", "--no-print-directory", "help")
	cmd.Dir = kubetest.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make help: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	first := strings.Fields(lines[0])
	if len(lines) < 10 || len(first) < 2 {
		t.Fatalf("make help lists too little:\n%s", out)
	}
	col := strings.Index(lines[0], first[1])
	for _, l := range lines {
		if len(l) > 100 {
			t.Errorf("line longer than 100 columns: %q", l)
		}
		if len(l) <= col || l[col] == ' ' || l[col-1] != ' ' {
			t.Errorf("description not at column %d: %q", col, l)
			continue
		}
		if head := l[:col]; strings.TrimSpace(head) != "" && (!strings.HasPrefix(head, "  ") || len(strings.Fields(head)) != 1) {
			t.Errorf("not a target then its description: %q", l)
		}
	}
}
