package localstack

import (
	"fmt"
	"net"
	"strconv"

	"github.com/regent-mq/regent/test/pgtest"
)

// freeIfZero returns addr with a free port in place of a zero one.
func freeIfZero(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("address %q: %w", addr, err)
	}
	if port != "0" {
		return addr, nil
	}
	p, err := pgtest.FreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), nil
}

// portsFree fails, before anything starts, when a port the stack listens on
// is taken: a second `make run`, or another program on 6632. Each process
// would otherwise fail on its own, after the control plane's start.
func portsFree(o Options) error {
	type listener struct{ addr, flag string }
	addrs := []listener{
		{net.JoinHostPort("127.0.0.1", strconv.Itoa(o.PGPort)), "--pg-port (REGENT_PG_PORT)"},
		{o.BrokerAddr, "--broker-addr (REGENT_BROKER_ADDR)"},
		{o.BrokerMetricsAddr, "--broker-metrics-addr (REGENT_BROKER_METRICS_ADDR)"},
		{o.MetricsAddr, "--operator-metrics-addr (REGENT_OPERATOR_METRICS_ADDR)"},
		{o.ProbeAddr, "--operator-probe-addr (REGENT_OPERATOR_PROBE_ADDR)"},
	}
	if o.PGPort != 0 {
		for i := range o.CitusWorkers {
			addrs = append(addrs, listener{net.JoinHostPort("127.0.0.1", strconv.Itoa(o.PGPort+1+i)),
				"--pg-port (REGENT_PG_PORT), whose next ports the Citus workers take"})
		}
	}
	for _, a := range addrs {
		if _, port, err := net.SplitHostPort(a.addr); err != nil || port == "0" {
			continue // a bad address fails where it is used; port 0 is picked free
		}
		l, err := net.Listen("tcp", a.addr)
		if err != nil {
			return fmt.Errorf("%s is not free (%w): another `make run`, or another program, listens there; stop it, or choose another address with %s",
				a.addr, err, a.flag)
		}
		l.Close()
	}
	return nil
}
