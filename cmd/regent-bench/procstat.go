package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Where the time of a run goes, and how much memory the broker takes, read
// from /proc: the broker under test and PostgreSQL are processes on this
// machine, given by their pids (-broker-pid, -pg-pid, and -node-pids for
// the nodes of a Citus cluster). A figure whose pid is not given is not
// reported.

// clockTick is the unit of the CPU times in /proc/<pid>/stat. Linux exports
// them in USER_HZ, which is 100 on every architecture whatever the kernel's
// own tick.
const clockTick = 10 * time.Millisecond

// procStat is what regent-bench reads of /proc/<pid>/stat.
type procStat struct {
	ppid int
	// own is the process's user and system time; reaped adds that of its
	// children that have exited and been waited for.
	own, reaped time.Duration
}

// parseStat reads a /proc/<pid>/stat line. The command name, in
// parentheses, may hold spaces and parentheses itself, so the fields are
// counted from the last ')'.
func parseStat(line []byte) (procStat, error) {
	i := bytes.LastIndexByte(line, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("stat line without a command name: %.40q", line)
	}
	// After the name: state, ppid, ... utime (14th field of the line), stime,
	// cutime, cstime.
	f := bytes.Fields(line[i+1:])
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("stat line with %d fields after the name", len(f))
	}
	var n [5]int64
	for k, field := range [5]int{1, 11, 12, 13, 14} {
		v, err := strconv.ParseInt(string(f[field]), 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("stat field %d: %w", field+3, err)
		}
		n[k] = v
	}
	return procStat{ppid: int(n[0]), own: time.Duration(n[1]+n[2]) * clockTick, reaped: time.Duration(n[3]+n[4]) * clockTick}, nil
}

func readStat(pid string) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

// processCPU is the CPU time of pid itself.
func processCPU(pid int) (time.Duration, error) {
	st, err := readStat(strconv.Itoa(pid))
	if err != nil {
		return 0, fmt.Errorf("cpu of process %d: %w", pid, err)
	}
	return st.own, nil
}

// treeCPU is the CPU time of pid and of all its children, those alive
// (PostgreSQL's backends, one per connection, and its background workers)
// and those it has reaped (backends of closed connections), so that the
// difference of two readings holds every child that ran between them.
func treeCPU(pid int) (time.Duration, error) {
	root, err := readStat(strconv.Itoa(pid))
	if err != nil {
		return 0, fmt.Errorf("cpu of process %d: %w", pid, err)
	}
	total := root.own + root.reaped
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("list processes: %w", err)
	}
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		st, err := readStat(e.Name())
		if err != nil {
			continue // a process that ended since the listing
		}
		if st.ppid == pid {
			total += st.own + st.reaped
		}
	}
	return total, nil
}

// residentBytes is pid's resident set size, the second field of
// /proc/<pid>/statm, in pages.
func residentBytes(pid int) (int64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "statm"))
	if err != nil {
		return 0, fmt.Errorf("memory of process %d: %w", pid, err)
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, fmt.Errorf("memory of process %d: statm %q", pid, b)
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("memory of process %d: %w", pid, err)
	}
	return pages * int64(os.Getpagesize()), nil
}

// cpuReading is the CPU time of each watched process at one instant, by
// the names the Result reports.
type cpuReading map[string]time.Duration

// readCPU reads the CPU of the tool itself and of the watched processes.
func (e *Env) readCPU() (cpuReading, error) {
	r := cpuReading{}
	var err error
	if r["tool"], err = processCPU(os.Getpid()); err != nil {
		return nil, err
	}
	if e.BrokerPID > 0 {
		if r["broker"], err = processCPU(e.BrokerPID); err != nil {
			return nil, err
		}
	}
	if e.PostgresPID > 0 {
		if r["postgres"], err = treeCPU(e.PostgresPID); err != nil {
			return nil, err
		}
	}
	for name, pid := range e.NodePIDs {
		if r[name], err = treeCPU(pid); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// watchRSS samples the broker's resident set until stop is closed, and
// sends the peak on the returned channel.
func (e *Env) watchRSS(stop <-chan struct{}) <-chan int64 {
	peak := make(chan int64, 1)
	go func() {
		var top int64
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			// A broker that has gone shows in the run's errors.
			if n, err := residentBytes(e.BrokerPID); err == nil {
				top = max(top, n)
			}
			select {
			case <-stop:
				peak <- top
				return
			case <-tick.C:
			}
		}
	}()
	return peak
}
