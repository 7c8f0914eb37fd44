// Command go-client-driver runs one scenario of Apache RocketMQ's Go client
// (rocketmq-client-go/v2, unchanged) against a name server:
//
//	go-client-driver SCENARIO --namesrv=HOST:PORT --topic=T --group=G [--name=value ...]
//
// It prints one JSON object per line on stdout, each with an "event" name (see events.go), and
// exits 0 after a "done" event; 2 after an "error" event naming what was still missing at the
// deadline (--timeout-ms, default 30 s); 1 after an "error" event with the failure; 3 if even
// shutting down hangs 5 s past the deadline. The client's own log (warnings and errors) goes
// to the file --log names, else to stderr. With --access-key and --secret-key every request is
// signed (primitive.Credentials), for servers with access control; with --tls true every
// connection is over TLS.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"
)

func main() {
	options := map[string]string{}
	scenario := ""
	for _, arg := range os.Args[1:] {
		if name, value, ok := strings.Cut(strings.TrimPrefix(arg, "--"), "="); ok && strings.HasPrefix(arg, "--") {
			options[name] = value
		} else {
			scenario = arg
		}
	}
	events := newEvents(os.Stdout)
	timeoutMs, err := strconv.Atoi(optionOr(options, "timeout-ms", "30000"))
	if err != nil {
		events.emit("error", "error", "--timeout-ms: "+err.Error())
		os.Exit(1)
	}
	timeout := time.Duration(timeoutMs) * time.Millisecond
	go func() {
		time.Sleep(timeout + 5*time.Second)
		events.emit("error", "error", "still running 5 s past the deadline")
		os.Exit(3)
	}()

	rlog.SetLogLevel("warn")
	if path := options["log"]; path != "" {
		if err := rlog.SetOutputPath(path); err != nil {
			events.emit("error", "error", "--log: "+err.Error())
			os.Exit(1)
		}
	}

	d := &driver{options: options, deadline: time.Now().Add(timeout), events: events,
		suffix: fmt.Sprintf("-%d", os.Getpid())}
	code := 0
	if err := run(d, scenario); err != nil {
		var missing *deadlineError
		if errors.As(err, &missing) {
			events.emit("error", "error", missing.Error())
			code = 2
		} else {
			events.emit("error", "error", err.Error())
			code = 1
		}
	} else {
		events.emit("done", "scenario", scenario)
	}
	os.Exit(code)
}

// run runs the scenario, turning a panic (a missing option, a client's) into an error.
func run(d *driver, scenario string) (err error) {
	defer func() {
		if failure := recover(); failure != nil {
			err = fmt.Errorf("panic: %v\n%s", failure, debug.Stack())
		}
	}()
	scenarios := map[string]func() error{
		"send":     d.send,
		"retry":    d.retry,
		"failover": d.failover,
		"sendOnce": d.sendOnce,
	}
	f, ok := scenarios[scenario]
	if !ok {
		return fmt.Errorf("unknown scenario %q", scenario)
	}
	return f()
}

func optionOr(options map[string]string, name, fallback string) string {
	if value, ok := options[name]; ok {
		return value
	}
	return fallback
}
