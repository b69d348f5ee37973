package localstack

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

func (s *Stack) logPath(name string) string { return filepath.Join(s.opts.Dir, "logs", name+".log") }

// openLog opens logs/<name>.log for appending, for a process whose output
// the stack keeps.
func (s *Stack) openLog(name string) (*os.File, error) {
	f, err := os.OpenFile(s.logPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	return f, nil
}

// logTail names a process's log and quotes its last lines, where a process
// that failed says why (a port in use, a host without a default route).
func (s *Stack) logTail(name string) string {
	const lines = 10
	path := s.logPath(name)
	buf, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(its log %s: %v)", path, err)
	}
	all := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	all = all[max(0, len(all)-lines):]
	return fmt.Sprintf("The end of %s:\n  %s", path, strings.Join(all, "\n  "))
}

// spawn starts bin/<name> with env added to this process's environment and
// its output in logs/<name>.log. Pdeathsig takes it down with us.
func (s *Stack) spawn(name string, args []string, env ...string) (*proc, error) {
	logFile, err := s.openLog(name)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(s.opts.BinDir, name), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	s.procs = append(s.procs, p)
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// waitReady waits for url to answer 200 while p runs: a process that exits
// (say, because its port is taken) fails at once, and another server that
// happens to answer on the port is not mistaken for it.
func waitReady(ctx context.Context, p *proc, url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %s", p.name, p.cmd.ProcessState)
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				select {
				case <-p.done:
					return fmt.Errorf("%s exited: %s", p.name, p.cmd.ProcessState)
				case <-time.After(100 * time.Millisecond):
					return nil
				}
			}
			err = fmt.Errorf("%s answered %d", url, resp.StatusCode)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return last
}
