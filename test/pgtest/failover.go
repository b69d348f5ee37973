package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Pair is a primary and a streaming standby that confirms every commit
// before the primary acknowledges it (synchronous replication), as a
// production cluster runs them, so that a test can fail the primary over.
type Pair struct {
	Primary, Standby *Cluster
}

// The primary acknowledges a commit once the standby has it. fsync stays
// off, since neither server's machine crashes. The standby must not wait
// for a standby of its own once promoted.
var (
	replicated = []string{"fsync=off", "full_page_writes=off", "synchronous_commit=on", "wal_level=replica", "max_wal_senders=5"}
	primary    = slices.Concat(replicated, []string{"synchronous_standby_names=*"})
	standby    = slices.Concat(replicated, []string{"hot_standby=on"})
)

// StartPair starts a primary, clones it with pg_basebackup into a standby
// and starts that. Both are stopped and removed when the test ends.
func StartPair(t testing.TB) *Pair {
	t.Helper()
	dir, err := ScratchDir("regent-pgtest-pair-")
	if err != nil {
		t.Fatalf("pgtest: make cluster directory: %v", err)
	}
	// Both data directories are the postgres user's, one level down.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := &Pair{}
	t.Cleanup(func() {
		for _, c := range []*Cluster{p.Standby, p.Primary} {
			if c != nil {
				c.Stop()
			}
		}
		os.RemoveAll(dir)
	})
	if p.Primary, err = StartCluster(filepath.Join(dir, "primary", "data"), 0, primary...); err != nil {
		t.Fatalf("pgtest: start primary: %v", err)
	}
	bin, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	cred, err := Credential()
	if err != nil {
		t.Fatal(err)
	}
	standbyDir := filepath.Join(dir, "standby", "data")
	if err := os.MkdirAll(filepath.Dir(standbyDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		if err := os.Chown(filepath.Dir(standbyDir), int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	// -R writes standby.signal and the primary_conninfo to stream from.
	backup := exec.Command(filepath.Join(bin, "pg_basebackup"), "-D", standbyDir, "-h", "127.0.0.1",
		"-p", strconv.Itoa(p.Primary.Port), "-U", "postgres", "-R", "-X", "stream", "--no-sync")
	backup.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := backup.CombinedOutput(); err != nil {
		t.Fatalf("pgtest: pg_basebackup: %v: %s", err, out)
	}
	if p.Standby, err = StartCluster(standbyDir, 0, standby...); err != nil {
		t.Fatalf("pgtest: start standby: %v", err)
	}
	// Until the standby streams, every commit on the primary waits for it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		var n int
		err := queryRow(ctx, p.Primary.URL("postgres").String(),
			`SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = 'sync'`, &n)
		if err == nil && n == 1 {
			return p
		}
		if ctx.Err() != nil {
			t.Fatalf("pgtest: the standby did not stream synchronously within 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// URL is a multi-host connection URL of database db that reaches whichever
// of the two servers accepts writes, as a client of a failing-over cluster
// connects.
func (p *Pair) URL(db string) string {
	u := p.Primary.URL(db)
	u.Host = fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", p.Primary.Port, p.Standby.Port)
	q, _ := url.ParseQuery(u.RawQuery)
	q.Set("target_session_attrs", "read-write")
	u.RawQuery = q.Encode()
	return u.String()
}

// FailOver stops the primary as a crash would (immediate shutdown: no
// checkpoint, clients cut off) and promotes the standby.
func (p *Pair) FailOver() error {
	_ = p.Primary.cmd.Process.Signal(syscall.SIGQUIT)
	<-p.Primary.exited
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var promoted bool
	if err := queryRow(ctx, p.Standby.URL("postgres").String(), `SELECT pg_promote(true, 60)`, &promoted); err != nil || !promoted {
		return fmt.Errorf("promote the standby: %v (promoted %v)", err, promoted)
	}
	return nil
}

func queryRow(ctx context.Context, url, sql string, dest any) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, sql).Scan(dest)
}
