package main

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseStatCountsTheFieldsFromTheLastParenthesis(t *testing.T) {
	// A command name may hold spaces and parentheses.
	line := "4242 (post) gres: x (y)) S 17 4242 4242 0 -1 4194560 120 0 0 0 250 75 30 12 20 0 1 0 100 1000 200\n"
	st, err := parseStat([]byte(line))
	require.NoError(t, err)
	require.Equal(t, 17, st.ppid)
	require.Equal(t, 3250*time.Millisecond, st.own)
	require.Equal(t, 420*time.Millisecond, st.reaped)

	_, err = parseStat([]byte("4242 (short) S 17 4242"))
	require.ErrorContains(t, err, "fields after the name")
	_, err = parseStat([]byte("no name at all"))
	require.Error(t, err)
}

func TestTreeCPUHoldsTheChildrenThatHaveExited(t *testing.T) {
	self := os.Getpid()
	st0, err := readStat(fmt.Sprint(self))
	require.NoError(t, err)
	tree0, err := treeCPU(self)
	require.NoError(t, err)
	// A child that spends CPU (a bounded loop in the shell), then is reaped.
	out, err := exec.Command("sh", "-c", `i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done`).CombinedOutput()
	require.NoError(t, err, string(out))
	st1, err := readStat(fmt.Sprint(self))
	require.NoError(t, err)
	tree1, err := treeCPU(self)
	require.NoError(t, err)
	reaped := st1.reaped - st0.reaped
	require.Greater(t, reaped, time.Duration(0), "the reaped child's time is in its parent's stat")
	require.GreaterOrEqual(t, tree1-tree0, reaped)
}

func TestTreeCPUOfAProcessThatIsNotThereIsAnError(t *testing.T) {
	_, err := treeCPU(1 << 30)
	require.Error(t, err)
	_, err = residentBytes(1 << 30)
	require.Error(t, err)
}
