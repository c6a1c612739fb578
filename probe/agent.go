package probe

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// Agent runs the endpoint side of fwab's own probes, as `fwab agent ARGS`
// does on an endpoint host: "connect-server --listen ADDR:PORT [--for D]"
// accepts connections until D has passed, "connect-client --to ADDR:PORT
// [--time D] [--parallel N] [--timeout D]" opens them and writes its
// ConnectResult to w as JSON; "blackout-recv" and "blackout-send" are the
// two ends of a Blackout stream, each reporting to w when its context
// ends (SIGTERM).
func Agent(ctx context.Context, args []string, w io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("agent: name connect-server or connect-client")
	}
	fs := flag.NewFlagSet("agent "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	switch args[0] {
	case "connect-server":
		listen := fs.String("listen", "", "address:port to listen on")
		life := fs.Duration("for", 10*time.Minute, "stop after this long")
		if err := parseAgent(fs, args[1:]); err != nil {
			return err
		}
		if *listen == "" {
			return fmt.Errorf("agent connect-server: --listen ADDR:PORT is required")
		}
		ctx, cancel := context.WithTimeout(ctx, *life)
		defer cancel()
		return ServeConnect(ctx, *listen)
	case "connect-client":
		var c Connect
		to := fs.String("to", "", "address:port of the connect-server")
		fs.DurationVar(&c.Duration, "time", 10*time.Second, "how long to open connections")
		fs.IntVar(&c.Parallel, "parallel", 4, "workers, one connection each at a time")
		fs.DurationVar(&c.Timeout, "timeout", time.Second, "longest handshake that counts")
		if err := parseAgent(fs, args[1:]); err != nil {
			return err
		}
		if *to == "" {
			return fmt.Errorf("agent connect-client: --to ADDR:PORT is required")
		}
		r, err := RunConnect(ctx, *to, c)
		if err != nil {
			return err
		}
		return json.NewEncoder(w).Encode(r)
	case "blackout-recv", "blackout-send":
		id := fs.String("id", "", "the stream's id")
		addr := fs.String("listen", "", "address:port to listen on (blackout-recv)")
		to := fs.String("to", "", "address:port of the blackout-recv (blackout-send)")
		life := fs.Duration("for", time.Hour, "stop after this long")
		rate := fs.Float64("rate", 1000, "datagrams a second")
		size := fs.Int("size", 64, "UDP payload bytes")
		conns := fs.Int("conns", 4, "TCP connections to hold open")
		payload := fs.String("payload", "", "hex bytes every datagram carries after its header (blackout-send)")
		fresh := fs.Bool("fresh-ports", false, "send each datagram from a new source port, a flow of its own (blackout-send)")
		if err := parseAgent(fs, args[1:]); err != nil {
			return err
		}
		body, err := hex.DecodeString(*payload)
		if err != nil || len(body) > 1472-blackoutHeader {
			return fmt.Errorf("agent %s: --payload %q: want up to %d bytes in hex", args[0], *payload, 1472-blackoutHeader)
		}
		if !strings.HasPrefix(*id, "fwab-blackout-") {
			return fmt.Errorf("agent %s: --id fwab-blackout-HEX is required", args[0])
		}
		if err := (Blackout{Rate: *rate, Size: *size, Conns: *conns}).Validate(); err != nil {
			return fmt.Errorf("agent %s: %w", args[0], err)
		}
		ctx, cancel := context.WithTimeout(ctx, *life)
		defer cancel()
		if args[0] == "blackout-recv" {
			if *addr == "" {
				return fmt.Errorf("agent blackout-recv: --listen ADDR:PORT is required")
			}
			return ReceiveBlackout(ctx, *id, *addr, w)
		}
		if *to == "" {
			return fmt.Errorf("agent blackout-send: --to ADDR:PORT is required")
		}
		return BlackoutSend{ID: *id, Addr: *to, Rate: *rate, Size: *size, Conns: *conns, Payload: body, FreshPorts: *fresh}.Run(ctx, w)
	}
	return fmt.Errorf("agent: %q is not connect-server, connect-client, blackout-recv or blackout-send", args[0])
}

func parseAgent(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%s: %w", fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}
