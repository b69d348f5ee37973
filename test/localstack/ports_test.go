package localstack_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/regent-mq/regent/test/localstack"
)

// A second `make run`, or any program on the broker's port, is named with
// the flag that moves it before anything starts, rather than surfacing as
// "broker exited: exit status 1" after the control plane's start.
func TestAPortInUseIsNamedBeforeAnythingStarts(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	_, err = localstack.Start(context.Background(), localstack.Options{
		Dir: dir, BrokerAddr: taken.Addr().String(), MetricsAddr: "127.0.0.1:0", ProbeAddr: "127.0.0.1:0",
	})
	if err == nil {
		t.Fatal("the stack started on a broker port that is taken")
	}
	for _, want := range []string{taken.Addr().String(), "not free", "REGENT_BROKER_ADDR"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "pg")); !os.IsNotExist(err) {
		t.Errorf("PostgreSQL's data directory exists (%v): something started before the ports were checked", err)
	}
}

// With a Citus cluster the workers take the ports after --pg-port: one of
// them taken is named as --pg-port's, before anything starts.
func TestACitusWorkersPortInUseIsNamedBeforeAnythingStarts(t *testing.T) {
	var taken net.Listener
	for taken == nil {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		below, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", l.Addr().(*net.TCPAddr).Port-1))
		if err != nil {
			l.Close() // the coordinator's port would be taken too: try another
			continue
		}
		below.Close()
		taken = l
	}
	defer taken.Close()
	dir := t.TempDir()
	_, err := localstack.Start(context.Background(), localstack.Options{
		Dir: dir, PGPort: taken.Addr().(*net.TCPAddr).Port - 1, CitusWorkers: 2,
		BrokerAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", ProbeAddr: "127.0.0.1:0",
	})
	if err == nil {
		t.Fatal("the stack started on a Citus worker's port that is taken")
	}
	for _, want := range []string{taken.Addr().String(), "not free", "REGENT_PG_PORT", "Citus workers"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "citus")); !os.IsNotExist(err) {
		t.Errorf("the Citus data directory exists (%v): something started before the ports were checked", err)
	}
}
