// Command regent-worker runs a StreamQuery's pipeline against a broker,
// exactly once: package streamworker speaks the protocol (and explains why
// it is exactly-once), package pipeline folds. This program only wires
// them, with flags, metrics and health.
//
//	regent-worker --broker http://localhost:6632 --query orders.revenue \
//	    --source orders --sink orders.revenue --pipeline revenue.yaml
//	regent-worker --check revenue.yaml              # validate, offline
//	regent-worker --pipeline revenue.yaml --print-config-hash
//	regent-worker --check revenue.sql               # a query in SQL: prints its pipeline too
//
// A pipeline file ending in .sql is a query in SQL (package
// pipeline/sqlquery); its FROM is the source queue unless --source says it.
//
// Without --pipeline it runs pipelines/count-per-minute.yaml: events
// {"key", "ts"} counted per key in one-minute tumbling windows.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/yaml"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/pipeline"
	"github.com/regent-mq/regent/pipeline/sqlquery"
	"github.com/regent-mq/regent/streamworker"
)

//go:embed pipelines/count-per-minute.yaml
var countPerMinute []byte

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "regent-worker:", err)
		os.Exit(2)
	}
	switch {
	case cfg.check:
		fmt.Printf("%s: valid, config hash %s\n", cfg.pipelineFile, cfg.prog.Hash)
		if cfg.compiled != nil {
			out, err := yaml.Marshal(map[string]any{"pipeline": cfg.compiled})
			if err != nil {
				fmt.Fprintln(os.Stderr, "regent-worker:", err)
				os.Exit(1)
			}
			fmt.Printf("%s compiles to:\n%s", cfg.pipelineFile, out)
		}
		return
	case cfg.printHash:
		fmt.Println(cfg.prog.Hash)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, cfg, log); err != nil {
		log.Error("worker stopped", "err", err)
		os.Exit(1)
	}
}

// config is what the worker is told.
type config struct {
	streamworker.Config
	pipelineFile string
	listen       string
	check        bool
	printHash    bool
	prog         *pipeline.Program
	compiled     *v1.Pipeline // what a .sql file compiled to
}

// envOf names each flag's environment fallback; an explicit flag wins.
var envOf = map[string]string{
	"broker": "REGENT_BROKER", "token": "REGENT_TOKEN", "query": "REGENT_QUERY", "source": "REGENT_SOURCE",
	"sink": "REGENT_SINK", "pipeline": "REGENT_PIPELINE", "listen": "REGENT_WORKER_LISTEN", "batch": "REGENT_BATCH",
	"workers": "REGENT_WORKERS", "wait": "REGENT_WAIT", "drain": "REGENT_DRAIN", "idle": "REGENT_IDLE",
}

func parseFlags(args []string) (config, error) {
	var c config
	var idle time.Duration
	fs := flag.NewFlagSet("regent-worker", flag.ContinueOnError)
	fs.StringVar(&c.Broker, "broker", "http://localhost:6632", "broker base URL")
	fs.StringVar(&c.Token, "token", "", "bearer token, when the broker has auth on")
	fs.StringVar(&c.Query, "query", "", "query name (required)")
	fs.StringVar(&c.Source, "source", "", "source queue (required)")
	fs.StringVar(&c.Sink, "sink", "", "sink queue for the output (required unless the query has a table sink)")
	fs.StringVar(&c.pipelineFile, "pipeline", "", "pipeline file, YAML or JSON, or a query in SQL (.sql); absent: count per key per minute")
	fs.StringVar(&c.listen, "listen", ":8080", "address of /metrics, /healthz and /readyz; empty for none")
	fs.IntVar(&c.Batch, "batch", 100, "messages per pop")
	fs.IntVar(&c.Concurrency, "workers", 2, "pop-fold-commit loops: how many partitions fold at once")
	fs.DurationVar(&c.Wait, "wait", 2*time.Second, "long-poll timeout of each pop")
	fs.DurationVar(&c.Drain, "drain", 30*time.Second, "on SIGTERM, how long the pops and cycles in flight may take to finish")
	fs.DurationVar(&idle, "idle", 0, "overrides the pipeline's idleFlush in this process (not part of the config hash)")
	fs.BoolVar(&c.printHash, "print-config-hash", false, "print the pipeline's config hash (a StreamQuery's configHash) and exit")
	check := fs.String("check", "", "validate this pipeline file offline, print its config hash, and exit")
	for name, variable := range envOf {
		f := fs.Lookup(name)
		f.Usage += " (env " + variable + ")"
		if v, ok := os.LookupEnv(variable); ok {
			if err := f.Value.Set(v); err != nil {
				return c, fmt.Errorf("%s=%q: %w", variable, v, err)
			}
		}
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var err error
	switch {
	case *check != "":
		c.check, c.pipelineFile = true, *check
		err = c.load()
	case c.pipelineFile != "":
		err = c.load()
	default:
		var spec, perr = pipeline.Parse(countPerMinute)
		if perr != nil {
			return c, perr
		}
		c.prog, err = pipeline.Compile(spec)
	}
	if err != nil || c.check || c.printHash {
		return c, err
	}
	c.Program = c.prog
	if idle > 0 {
		c.prog.IdleFlush = idle
	}
	if c.Query == "" || c.Source == "" {
		return c, errors.New("--query and --source are required")
	}
	if c.Batch < 1 || c.Concurrency < 1 {
		return c, errors.New("--batch and --workers must be at least 1")
	}
	return c, nil
}

// load compiles the pipeline file: a pipeline, or a query in SQL whose
// FROM is the source queue.
func (c *config) load() error {
	if !strings.HasSuffix(c.pipelineFile, ".sql") {
		var err error
		c.prog, err = pipeline.Load(c.pipelineFile)
		return err
	}
	q, err := sqlquery.Load(c.pipelineFile)
	if err != nil {
		return err
	}
	if c.Source == "" {
		c.Source = q.Source
	}
	if c.Source != q.Source {
		return fmt.Errorf("%s reads FROM %q, not --source %q", c.pipelineFile, q.Source, c.Source)
	}
	c.prog, c.compiled = q.Program, &q.Pipeline
	return nil
}

func run(ctx context.Context, cfg config, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Log, cfg.Metrics = log, streamworker.NewMetrics(reg)
	w := streamworker.New(cfg.Config)
	if cfg.listen != "" {
		ln, err := net.Listen("tcp", cfg.listen)
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) { fmt.Fprintln(rw, "ok") })
		mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, _ *http.Request) {
			if !w.Ready() {
				http.Error(rw, "not ready: the query is not registered, or the broker did not answer last", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(rw, "ok")
		})
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server stopped", "err", err)
			}
		}()
		defer srv.Close()
		log.Info("serving /metrics, /healthz and /readyz", "addr", ln.Addr().String())
	}
	return w.Run(ctx)
}
