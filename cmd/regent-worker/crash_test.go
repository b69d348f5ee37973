package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/pipeline"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }

const (
	crashPartitions = 8
	crashEvents     = 20_000
	crashKills      = 6
)

// brokerProcess is the broker binary running as a child process, so that
// the test can SIGKILL it and start it again on the same address.
type brokerProcess struct {
	t    *testing.T
	bin  string
	addr string
	db   string
	log  *os.File
	cmd  *exec.Cmd
}

func (b *brokerProcess) start() {
	b.t.Helper()
	b.cmd = exec.Command(b.bin, "--listen="+b.addr, "--database-url="+b.db, "--log-level=warn", "--pool-size=10")
	b.cmd.Stdout, b.cmd.Stderr = b.log, b.log
	if err := b.cmd.Start(); err != nil {
		b.t.Fatalf("start broker: %v", err)
	}
	brokertest.Eventually(b.t, 30*time.Second, func() error {
		resp, err := http.Get("http://" + b.addr + "/health")
		if err != nil {
			return fmt.Errorf("the broker is not healthy: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("the broker is not healthy: %d", resp.StatusCode)
		}
		return nil
	})
}

// query is what the worker's query has done, read from the broker's
// database: tenant default, source queue events.
type query struct {
	t    *testing.T
	db   *dbtest.DB
	name string
}

// cursors are the query's group's cursors on events.
func (q query) cursors() []dbtest.Cursor {
	q.t.Helper()
	all, err := q.db.Cursors(q.t.Context(), "default", "events")
	if err != nil {
		q.t.Fatal(err)
	}
	var out []dbtest.Cursor
	for _, c := range all {
		if c.Group == "streams."+q.name {
			out = append(out, c)
		}
	}
	return out
}

// consumed is the events its group committed.
func (q query) consumed() int64 {
	q.t.Helper()
	var n int64
	for _, c := range q.cursors() {
		n += c.Committed
	}
	return n
}

// open counts its windows still open: its state rows but the clock.
func (q query) open() int {
	q.t.Helper()
	id, _, err := q.db.StreamQueryNamed(q.t.Context(), "default", q.name)
	if err != nil {
		q.t.Fatal(err)
	}
	state, err := q.db.StateOf(q.t.Context(), id)
	if err != nil {
		q.t.Fatal(err)
	}
	open := 0
	for _, row := range state {
		if row.Key != pipeline.ClockKey {
			open++
		}
	}
	return open
}

// build builds one of the module's commands into dir.
func build(t *testing.T, dir, command string) string {
	t.Helper()
	bin := filepath.Join(dir, command)
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/regent-mq/regent/cmd/"+command).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", command, err, out)
	}
	return bin
}

// startBroker builds and starts a broker process on a fresh database, and
// opens a pool on that database; both go when the test ends.
func startBroker(t *testing.T, dir string) (*brokerProcess, *pgxpool.Pool) {
	t.Helper()
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "broker.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	b := &brokerProcess{t: t, bin: build(t, dir, "broker"), addr: "127.0.0.1:" + strconv.Itoa(port), db: pgtest.URL(t), log: logFile}
	b.start()
	t.Cleanup(b.kill)
	pool, err := pgxpool.New(context.Background(), b.db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return b, pool
}

func (b *brokerProcess) kill() {
	_ = b.cmd.Process.Kill() // SIGKILL: no shutdown, no drain
	_ = b.cmd.Wait()
}

func (b *brokerProcess) post(path string, body any) []byte {
	b.t.Helper()
	buf, _ := json.Marshal(body)
	resp, err := http.Post("http://"+b.addr+path, "application/json", bytes.NewReader(buf))
	if err != nil {
		b.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		b.t.Fatalf("POST %s: %d %s", path, resp.StatusCode, out)
	}
	return out
}

type windowID struct {
	partition, key string
	start          string
}

// TestExactlyOnceWhileTheBrokerIsKilled runs the reference worker over
// 20,000 events on 8 partitions while the broker process is SIGKILLed and
// restarted at random moments. Every window must reach the sink exactly
// once, with exactly the events it should count.
func TestExactlyOnceWhileTheBrokerIsKilled(t *testing.T) {
	b, pool := startBroker(t, t.TempDir())

	// A short lease: a pop whose answer a kill swallowed leaves a lease
	// that hides its partition until it expires.
	b.post("/api/v1/configure", map[string]any{"queue": "events", "options": map[string]any{"leaseTime": 2}})
	want := map[windowID]int64{}
	base := time.Date(2026, 8, 17, 10, 0, 0, 0, time.UTC).UnixMilli()
	keys := []string{"acme", "globex", "initech", "umbrella", "hooli"}
	var items []map[string]any
	for i := range crashEvents {
		p, j := i%crashPartitions, i/crashPartitions
		ts := base + int64(j)*97 + int64(p)*13 // ordered per partition, ~4 windows each
		key := keys[(j*7+p)%len(keys)]
		partition := fmt.Sprintf("p%d", p)
		items = append(items, map[string]any{"queue": "events", "partition": partition, "payload": map[string]any{"key": key, "ts": ts}})
		want[windowID{partition, key, time.UnixMilli(ts - ts%60_000).UTC().Format("2006-01-02T15:04:05.000Z")}]++
		if len(items) == 1000 {
			b.post("/api/v1/push", map[string]any{"items": items})
			items = nil
		}
	}

	level := slog.LevelWarn + 10
	if os.Getenv("REGENT_TEST_LOG") != "" {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, err := parseFlags([]string{"-broker", "http://" + b.addr, "-query", "crash.per_minute", "-source", "events",
		"-sink", "events.per_minute", "-batch", "50", "-workers", "2", "-idle", "3s", "-wait", "500ms", "-listen", ""})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, log) }()

	consumed := query{t, dbtest.New(pool), "crash.per_minute"}.consumed
	// Kill k lands at a random point of the run's k-th slice (of
	// crashKills+1), reached by progress rather than by time: on a fast
	// machine a run outpaced kills spread over fixed delays.
	midRun := 0
	slice := int64(crashEvents / (crashKills + 1))
	for k := range int64(crashKills) {
		target := (k+1)*slice + rand.Int64N(slice/2)
		brokertest.Eventually(t, 60*time.Second, func() error {
			if n := consumed(); n < target {
				return fmt.Errorf("kill %d: the worker has not reached %d events (at %d)", k+1, target, n)
			}
			return nil
		})
		if n := consumed(); n < crashEvents {
			midRun++
			t.Logf("kill %d at %d of %d events", k+1, n, crashEvents)
		}
		b.kill()
		// Real time: the broker stays down a random while, as a crashed
		// pod does, and the worker's retries run against a closed port.
		time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
		b.start()
	}
	if midRun < 5 {
		t.Fatalf("only %d of %d kills hit the worker mid-run", midRun, crashKills)
	}

	// Done when the source is consumed and the idle flush has closed every
	// window.
	q := query{t, dbtest.New(pool), "crash.per_minute"}
	brokertest.Eventually(t, 90*time.Second, func() error {
		select {
		case err := <-done:
			t.Fatalf("the worker stopped: %v", err)
		default:
		}
		if n, open := q.consumed(), q.open(); n != crashEvents || open != 0 {
			return fmt.Errorf("not done: %d of %d events consumed, %d windows open", n, crashEvents, open)
		}
		return nil
	})
	cancel()
	<-done

	got := map[windowID]int64{}
	var sum int64
	for {
		resp, err := http.Get("http://" + b.addr + "/api/v1/pop/queue/events.per_minute?batch=1000&partitions=8&autoAck=true")
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Messages []struct {
				Partition string `json:"partition"`
				Data      struct {
					Key         string `json:"key"`
					WindowStart string `json:"windowStart"`
					Count       int64  `json:"count"`
				} `json:"data"`
			} `json:"messages"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if resp.StatusCode == http.StatusNoContent {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Messages {
			id := windowID{m.Partition, m.Data.Key, m.Data.WindowStart}
			if _, twice := got[id]; twice {
				t.Errorf("window %v emitted twice", id)
			}
			got[id] = m.Data.Count
			sum += m.Data.Count
		}
	}
	if sum != crashEvents {
		t.Errorf("the sink's windows count %d events, want exactly %d", sum, crashEvents)
	}
	for id, n := range want {
		if got[id] != n {
			t.Errorf("window %v counted %d, want %d", id, got[id], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d windows emitted, want %d", len(got), len(want))
	}
}
