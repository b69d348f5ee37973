package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSIGTERMFinishesTheCycleInFlightAndLeavesNoLease runs regent-worker as
// a process against a real broker, reads its health and metrics, stops it
// with SIGTERM in the middle of the run, and then lets a second process
// finish: the first must exit 0 leaving no live lease, and the sink must
// count every event once.
func TestSIGTERMFinishesTheCycleInFlightAndLeavesNoLease(t *testing.T) {
	dir := t.TempDir()
	b, pool := startBroker(t, dir)
	worker := build(t, dir, "regent-worker")
	const events = 4000
	base := time.Date(2026, 8, 17, 10, 0, 0, 0, time.UTC).UnixMilli()
	for chunk := 0; chunk < events; chunk += 1000 {
		var items []map[string]any
		for i := chunk; i < chunk+1000; i++ {
			items = append(items, map[string]any{"queue": "events", "partition": fmt.Sprintf("p%d", i%4),
				"payload": map[string]any{"key": fmt.Sprintf("k%d", i%7), "ts": base + int64(i)*50}})
		}
		b.post("/api/v1/push", map[string]any{"items": items})
	}
	metricsPort, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	listen := "127.0.0.1:" + strconv.Itoa(metricsPort)
	args := []string{"-broker", "http://" + b.addr, "-query", "term.per_minute", "-source", "events", "-sink", "events.out",
		"-batch", "10", "-workers", "4", "-wait", "500ms", "-idle", "2s"}
	first := exec.Command(worker, append(args, "-listen", listen)...)
	firstLog, err := os.Create(filepath.Join(dir, "worker-1.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer firstLog.Close()
	first.Stdout, first.Stderr = firstLog, firstLog
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Process.Kill() }()
	q := query{t, dbtest.New(pool), "term.per_minute"}
	brokertest.Eventually(t, 30*time.Second, func() error {
		if n := q.consumed(); n < events/4 {
			return fmt.Errorf("the worker is not a quarter through (at %d)", n)
		}
		return nil
	})
	if code, body := get("http://" + listen + "/healthz"); code != 200 {
		t.Fatalf("/healthz = %d %s", code, body)
	}
	if code, body := get("http://" + listen + "/readyz"); code != 200 {
		t.Fatalf("/readyz = %d %s", code, body)
	}
	code, metrics := get("http://" + listen + "/metrics")
	m := regexp.MustCompile(`(?m)^regent_worker_events_in_total (\d+)`).FindStringSubmatch(metrics)
	if code != 200 || m == nil || m[1] == "0" || !regexp.MustCompile(`regent_worker_cycles_total\{kind="fold"\} [1-9]`).MatchString(metrics) {
		t.Fatalf("/metrics = %d, events in %v; want folds counted:\n%s", code, m, metrics)
	}

	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- first.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			out, _ := os.ReadFile(firstLog.Name())
			t.Fatalf("SIGTERM: the worker exited with %v\n%s", err, out)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM: the worker did not exit within 10s")
	}
	at := q.consumed()
	live := 0
	for _, c := range q.cursors() {
		if c.LeaseExpiresAt != nil && c.LeaseExpiresAt.After(time.Now()) {
			live++
		}
	}
	if live != 0 || at >= events {
		t.Fatalf("after SIGTERM at %d of %d events: %d live leases, want none, mid-run", at, events, live)
	}

	second := exec.Command(worker, append(args, "-listen", "")...)
	second.Stdout, second.Stderr = io.Discard, io.Discard
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = second.Process.Kill(); _ = second.Wait() }()
	brokertest.Eventually(t, 60*time.Second, func() error {
		if n, open := q.consumed(), q.open(); n != events || open != 0 {
			return fmt.Errorf("not done: %d of %d consumed, %d windows open", n, events, open)
		}
		return nil
	})
	got := int64(0)
	for {
		code, body := get("http://" + b.addr + "/api/v1/pop/queue/events.out?batch=1000&partitions=4&autoAck=true")
		if code == http.StatusNoContent {
			break
		}
		for _, m := range regexp.MustCompile(`"count":(\d+)`).FindAllStringSubmatch(body, -1) {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			got += n
		}
	}
	if got != events {
		t.Fatalf("the sink's windows count %d events, want exactly %d", got, events)
	}
	t.Logf("SIGTERM at %d of %d events", at, events)
}
