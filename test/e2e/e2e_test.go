// Package e2e runs the whole stack the way `make run` does, as local
// processes, and drives it the way a user would: kubectl applies the
// samples, the reference worker runs a registered query, and deleting the
// samples does what their deletion policies say.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/pipeline"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/kubetest"
	"github.com/regent-mq/regent/test/localstack"
)

const (
	tenant   = "acme"
	query    = "orders.per_minute" // config/samples/acme-streamquery.yaml
	source   = "orders"
	sink     = "orders.per_minute"
	retained = "clicks-per-page" // config/samples/default-streamquery.yaml, deletionPolicy Retain
)

func TestWholeStackFromSamplesToSinkAndBack(t *testing.T) {
	if testing.Short() {
		t.Skip("the whole stack takes a while")
	}
	root := kubetest.RepoRoot()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/broker", "./cmd/operator", "./cmd/regent-worker")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ctx := context.Background()
	// Not t.TempDir: its parents are private to root, and PostgreSQL runs
	// as the postgres user.
	dir, err := os.MkdirTemp("", "regent-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stack, err := localstack.Start(ctx, localstack.Options{
		// Zero ports: each is picked as its process starts.
		Dir: dir, BinDir: bin, CRDDir: filepath.Join(root, "config", "crd", "bases"),
		BrokerAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", ProbeAddr: "127.0.0.1:0",
		Progress: testWriter{t},
	})
	// The logs live in dir, which is gone once the test ends: a failure
	// shows them, a failed start included.
	showLogs := func() {
		for _, name := range []string{"broker", "operator"} {
			log, _ := os.ReadFile(filepath.Join(dir, "logs", name+".log"))
			t.Logf("%s log:\n%s", name, tail(log, 4000))
		}
	}
	if err != nil {
		showLogs()
		t.Fatal(err)
	}
	t.Cleanup(stack.Stop)
	defer func() {
		if t.Failed() {
			showLogs()
		}
	}()
	db, err := pgxpool.New(ctx, stack.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	d := dbtest.New(db)
	kubectl := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(kubetest.AssetsDir(), "kubectl"), args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "KUBECONFIG="+stack.Kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}

	// The samples, applied as the README says, become Ready registrations
	// and a quota row.
	kubectl("apply", "-f", "config/samples/")
	kubectl("wait", "--for=condition=Ready", "streamquery", "--all", "--all-namespaces", "--timeout=90s")
	kubectl("wait", "--for=condition=Ready", "tenantquota", "--all", "--timeout=60s")
	queryID, _, err := d.StreamQueryNamed(ctx, tenant, query)
	if err != nil || queryID == "" {
		t.Fatalf("registration of %s/%s: %q, %v", tenant, query, queryID, err)
	}
	if got := kubectl("get", "sq", "orders-per-minute", "-n", "acme-streams", "-o", "jsonpath={.status.queryId}"); got != queryID {
		t.Fatalf("status.queryId = %q, database has %q", got, queryID)
	}
	byTenant, err := d.StreamQueriesByTenant(ctx, "")
	registrations := 0
	for _, n := range byTenant {
		registrations += n
	}
	if err != nil || registrations != 4 {
		t.Fatalf("registrations = %d (%v), want the four samples", registrations, err)
	}
	// The sample with a pipeline and no configHash registers the hash the
	// worker computes from the same pipeline.
	pipelineJSON := kubectl("get", "sq", "orders-revenue", "-n", "default", "-o", "jsonpath={.spec.pipeline}")
	spec, err := pipeline.Parse([]byte(pipelineJSON))
	if err != nil {
		t.Fatal(err)
	}
	if _, q, err := d.StreamQueryNamed(ctx, "default", "orders-revenue"); err != nil || q.ConfigHash != spec.ConfigHash() {
		t.Fatalf("orders-revenue registered with hash %q (%v), want its pipeline's %q", q.ConfigHash, err, spec.ConfigHash())
	}
	quota, err := d.Quota(ctx, tenant)
	if err != nil {
		t.Fatalf("quota row of %s: %v", tenant, err)
	}
	if !quota.Enabled || quota.MaxQueries == nil || *quota.MaxQueries != 10 {
		t.Fatalf("quota row = enabled %v, max %v; the sample grants 10", quota.Enabled, quota.MaxQueries)
	}

	// The reference worker runs the registered query: every pushed event is
	// counted once in the sink.
	secret, err := os.ReadFile(filepath.Join(dir, "signing-secret"))
	if err != nil {
		t.Fatal(err)
	}
	token, err := auth.MintHS256(secret, auth.MintClaims{Subject: "e2e", Tenant: tenant, Role: auth.ReadWrite, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const events = 600
	base := time.Date(2026, 8, 17, 10, 0, 0, 0, time.UTC).UnixMilli()
	items := make([]map[string]any, 0, events)
	for i := range events {
		items = append(items, map[string]any{
			"queue": source, "partition": fmt.Sprintf("p%d", i%3),
			"payload": map[string]any{"key": fmt.Sprintf("k%d", i%5), "ts": base + int64(i)*1000},
		})
	}
	api := brokertest.At(stack.BrokerURL)
	if r := api.Do(t, "POST", "/api/v1/push", token, map[string]any{"items": items}); r.Status != http.StatusCreated {
		t.Fatalf("push = %d %s", r.Status, r.Body)
	}
	wctx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	worker := exec.CommandContext(wctx, filepath.Join(bin, "regent-worker"), "-broker", stack.BrokerURL,
		"-query", query, "-source", source, "-sink", sink, "-idle", "2s", "-wait", "500ms", "-listen", "")
	worker.Env = append(os.Environ(), "REGENT_TOKEN="+token)
	var workerLog bytes.Buffer
	worker.Stdout, worker.Stderr = &workerLog, &workerLog
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	counted := api.SinkCounts(t, sink, "e2e", token, events, 90*time.Second)
	stopWorker()
	_ = worker.Wait()
	if counted != events {
		t.Fatalf("the sink counted %d events, want exactly %d; worker log:\n%s", counted, events, tail(workerLog.Bytes(), 4000))
	}

	// Deleting the samples: the Delete policy removes the registration and
	// its state, Retain keeps it, and the quota row goes with its TenantQuota.
	// The namespace is deleted without waiting: a bare control plane has no
	// namespace controller to finish it.
	kubectl("delete", "--wait=true", "--timeout=90s", "-f", "config/samples/acme-streamquery.yaml",
		"-f", "config/samples/default-streamquery.yaml", "-f", "config/samples/acme-tenantquota.yaml")
	kubectl("delete", "--wait=false", "-f", "config/samples/acme-namespace.yaml")
	if left, err := d.StreamQueries(ctx, tenant, query); err != nil || left != 0 {
		t.Fatalf("the Delete-policy registration is still there (%d, %v)", left, err)
	}
	if left, err := d.StateRows(ctx, queryID); err != nil || left != 0 {
		t.Fatalf("state of the deleted query is still there (%d rows, %v)", left, err)
	}
	if left, err := d.StreamQueries(ctx, "default", retained); err != nil || left != 1 {
		t.Fatalf("the Retain-policy registration is gone (%d, %v)", left, err)
	}
	if q, err := d.Quota(ctx, tenant); err != nil || q.Exists {
		t.Fatalf("the quota row outlived its TenantQuota (%+v, %v)", q, err)
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}
