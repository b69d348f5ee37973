// Command regent-bench drives any broker that speaks the Queen queue
// protocol over HTTP and prints one JSON line per run: throughput, request
// latency percentiles, errors and, where the scenario checks it, whether
// every message was seen exactly once. Given the pids of a broker and a
// PostgreSQL on this machine, it adds the broker's peak RSS and where the
// CPU went: broker, PostgreSQL, and the tool itself. Pushed items carry a
// UUIDv7 transactionId, as those of Queen's JavaScript client do, unless
// -txid=false.
//
//	regent-bench -url http://127.0.0.1:6632 -scenario push   -c 4 -b 100 -p 16 -n 200000
//	regent-bench -url http://127.0.0.1:6632 -scenario popack -c 4 -b 100 -p 16 -n 100000
//
// Scenarios register themselves in scenarios (see register); each lives in
// a file of its own.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// scenario runs one measured load against env and fills in the result.
type scenario func(ctx context.Context, env *Env, res *Result) error

var scenarios = map[string]scenario{}

// register adds a scenario; call it from an init function.
func register(name string, s scenario) { scenarios[name] = s }

func main() {
	env := &Env{}
	var name string
	var runs int
	var limit time.Duration
	flag.StringVar(&env.URL, "url", "http://127.0.0.1:6632", "broker base URL")
	flag.StringVar(&env.Token, "token", os.Getenv("REGENT_BENCH_TOKEN"), "bearer token, when the broker has auth on")
	flag.StringVar(&name, "scenario", "push", "scenario: "+strings.Join(names(), ", "))
	flag.IntVar(&env.C, "c", 4, "concurrent clients")
	flag.IntVar(&env.B, "b", 100, "messages per request (batch)")
	flag.IntVar(&env.P, "p", 16, "partitions")
	flag.IntVar(&env.N, "n", 200000, "messages")
	flag.IntVar(&env.Keys, "keys", 0, "pipeline, stock: fold per key, over this many keys (the payloads then carry id, key and amount)")
	flag.StringVar(&env.Sink, "sink", "queue", "emit: where the outputs go, queue or table")
	flag.StringVar(&env.DatabaseURL, "database-url", os.Getenv("DATABASE_URL"), "emit -sink table: the cell database, where the table is created")
	flag.IntVar(&env.Size, "size", 64, "approximate payload size in bytes")
	flag.StringVar(&env.Queue, "queue", "", "queue name (default: a fresh one per run, deleted after it with the queues the run made)")
	keep := flag.Bool("keep-queues", false, "keep each run's fresh queues (deleting them takes an admin token when auth is on)")
	flag.BoolVar(&env.TxIDs, "txid", true, "push: give every item a UUIDv7 transactionId, as Queen's JavaScript client does; -txid=false sends none")
	flag.IntVar(&env.BrokerPID, "broker-pid", 0, "the broker's process id, when it runs on this machine: report its CPU and peak RSS from /proc")
	flag.IntVar(&env.PostgresPID, "pg-pid", 0, "PostgreSQL's postmaster pid, when it runs on this machine: report the CPU of all its processes from /proc")
	flag.Func("node-pids", "a Citus cluster's postmasters, as name=pid,name=pid (coordinator=…,worker1=…): report the CPU of each node's processes, as -pg-pid does", func(v string) error {
		env.NodePIDs = map[string]int{}
		for _, f := range strings.Split(v, ",") {
			name, pid, ok := strings.Cut(f, "=")
			n, err := strconv.Atoi(pid)
			if !ok || name == "" || err != nil || n <= 0 {
				return fmt.Errorf("want name=pid, got %q", f)
			}
			env.NodePIDs[name] = n
		}
		return nil
	})
	flag.BoolVar(&env.Prefilled, "prefilled", false, "popack, cycle: the queue already holds the N messages; do not fill it")
	flag.IntVar(&runs, "runs", 1, "how many times to run; one JSON line each")
	flag.DurationVar(&limit, "limit", 10*time.Minute, "give up a run after this long")
	cpuProfile := flag.String("cpuprofile", "", "write the tool's CPU profile (the pipeline scenario's worker, mostly) to this file")
	flag.Parse()

	s, ok := scenarios[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "regent-bench: unknown scenario %q (have %s)\n", name, strings.Join(names(), ", "))
		os.Exit(2)
	}
	if env.C < 1 || env.B < 1 || env.P < 1 || env.N < 1 {
		fmt.Fprintln(os.Stderr, "regent-bench: -c, -b, -p and -n must be positive")
		os.Exit(2)
	}
	if err := env.init(); err != nil {
		fmt.Fprintln(os.Stderr, "regent-bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "regent-bench: cpu profile:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	failed := false
	queue := env.Queue
	var results []*Result
	for i := 0; i < runs; i++ {
		env.Queue = queue
		if env.Queue == "" {
			env.Queue = fmt.Sprintf("bench-%s-%d", name, time.Now().UnixNano())
		}
		rctx, cancel := context.WithTimeout(ctx, limit)
		res := env.run(rctx, name, s)
		if queue == "" && !*keep && res.Error == "" {
			if err := env.Drop(rctx); err != nil {
				res.Error = err.Error()
			}
		}
		cancel()
		line, _ := json.Marshal(res)
		fmt.Println(string(line))
		results = append(results, res)
		failed = failed || res.Error != "" || res.Verified != nil && !*res.Verified
	}
	fmt.Fprintln(os.Stderr, summary(results))
	if failed {
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// summary is the line that reports a scenario's runs: the median of each
// figure, since one run on a shared machine says little, and the largest
// peak RSS.
func summary(results []*Result) string {
	median := func(f func(*Result) float64) float64 {
		v := make([]float64, len(results))
		for i, r := range results {
			v[i] = f(r)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	line := fmt.Sprintf("# %s, median of %d runs: %.0f msgs/s", results[0].Scenario, len(results),
		median(func(r *Result) float64 { return r.MsgsPerSec }))
	if results[0].CyclesPerSec > 0 {
		line += fmt.Sprintf(", %.0f cycles/s", median(func(r *Result) float64 { return r.CyclesPerSec }))
	}
	line += fmt.Sprintf(", p50 %.3f ms, p99 %.3f ms",
		median(func(r *Result) float64 { return r.P50Ms }), median(func(r *Result) float64 { return r.P99Ms }))
	if cpu := results[0].CPUMsPerRequest; cpu != nil {
		line += "; CPU per request:"
		for _, k := range cpuOrder(cpu) {
			line += fmt.Sprintf(" %s %.3f ms", k, median(func(r *Result) float64 { return r.CPUMsPerRequest[k] }))
		}
	}
	if cpu := results[0].CPUMsPer1000Msgs; cpu != nil && results[0].Keys > 0 {
		line += "; CPU per 1,000 msgs:"
		for _, k := range cpuOrder(cpu) {
			line += fmt.Sprintf(" %s %.1f ms", k, median(func(r *Result) float64 { return r.CPUMsPer1000Msgs[k] }))
		}
	}
	// Memory has a ceiling to stay under, so the worst run is the figure.
	var rss float64
	for _, r := range results {
		rss = max(rss, r.BrokerRSSPeakMB)
	}
	if rss > 0 {
		line += fmt.Sprintf("; broker RSS peak %.1f MB", rss)
	}
	return line
}

// cpuOrder is the order of a summary's CPU figures: the broker, PostgreSQL,
// the nodes of a Citus cluster by name, and the tool.
func cpuOrder(cpu map[string]float64) []string {
	var nodes []string
	for k := range cpu {
		if k != "broker" && k != "postgres" && k != "tool" {
			nodes = append(nodes, k)
		}
	}
	sort.Strings(nodes)
	var out []string
	for _, k := range slices.Concat([]string{"broker", "postgres"}, nodes, []string{"tool"}) {
		if _, ok := cpu[k]; ok {
			out = append(out, k)
		}
	}
	return out
}

func names() []string {
	var out []string
	for n := range scenarios {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
