package pgtest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ramDir is where throwaway clusters live when it is a tmpfs. Every test
// database is a copy of the migrated template, some 400 files, and on ext4
// creating and deleting that many files spent most of the broker tests'
// time in the kernel's inode allocator (perf: find_inode_bit and
// recently_deleted). On tmpfs the broker/api/queue suite ran 16 s instead of
// 38 s, with a third of the system time.
const ramDir = "/dev/shm"

const tmpfsMagic = 0x01021994

// ScratchDir makes a directory for a throwaway cluster: under ramDir when
// it is a tmpfs, else under the system's temporary directory. A prefix
// starting "regent-pgtest-" lets a later run sweep it up if its test binary
// is killed (clusters may sit one or two levels below it). Not
// t.TempDir: its parent is private to root, and as root PostgreSQL runs as
// the postgres user, which must reach the data directory.
func ScratchDir(prefix string) (string, error) {
	root := scratchRoot()
	if root == ramDir {
		sweep(ramDir)
	}
	return os.MkdirTemp(root, prefix)
}

// scratchRoot is ramDir when it is a tmpfs, else the system's temporary
// directory.
func scratchRoot() string {
	var fs syscall.Statfs_t
	if syscall.Statfs(ramDir, &fs) == nil && fs.Type == tmpfsMagic {
		return ramDir
	}
	return os.TempDir()
}

// sweep removes the clusters of test binaries that were killed before they
// could remove their own (a test timeout, a SIGKILL): PostgreSQL dies with
// its test binary, but its directory would hold RAM until a reboot. A
// directory is stale when it is an hour old and no process of its
// postmaster.pid is alive; a younger one may still be running initdb.
func sweep(root string) {
	dirs, _ := filepath.Glob(filepath.Join(root, "regent-pgtest-*"))
	for _, dir := range dirs {
		info, err := os.Stat(dir)
		if err != nil || time.Since(info.ModTime()) < time.Hour || running(dir) {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}

// running reports whether a postmaster.pid under dir names a live process.
func running(dir string) bool {
	pids, _ := filepath.Glob(filepath.Join(dir, "*", "postmaster.pid"))
	more, _ := filepath.Glob(filepath.Join(dir, "*", "*", "postmaster.pid"))
	for _, f := range append(pids, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			return true
		}
		pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
		if err != nil {
			return true
		}
		if err := syscall.Kill(pid, 0); err == nil || err == syscall.EPERM {
			return true
		}
	}
	return false
}
