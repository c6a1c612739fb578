package probe

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// HTTP is an HTTP or HTTPS load through the firewall, as RFC 9411
// benchmarks a network security device with its features on (section 7.3,
// HTTP throughput by object size; 7.4, transactions a second; 7.6, time to
// first and last byte; 7.7–7.9 the same over HTTPS): nginx on the server
// serves one object of Object bytes, h2load on the client fetches it over
// HTTP/1.1 for Duration on Clients connections, each keeping one request
// in flight.
//
// Why h2load and not wrk: h2load writes every request's time to its end
// (--log-file), so the median and the 99th percentile are exact, not read
// off a histogram; it reports the time to the first byte, the TLS version
// and cipher; and --rps offers a fixed rate (wrk only loads as fast as
// the server answers, and wrk2, which does not, is not packaged).
//
// Open or closed loop: with Rate 0 each connection sends its next request
// when the last is answered (closed loop: the most transactions a
// second). With Rate, h2load --rps issues each connection's share at a
// fixed rate; a request that comes due while its connection is busy waits
// and its time counts from when it went out, not when it was due, so a
// backlog shows as transactions a second below the rate offered, not in
// the latency (coordinated omission, which the result's Offered beside
// PerSecond makes visible).
//
// upstream: nghttp2/nghttp2@be0491294a63d891bd12b6b1b7e372a45a5d0ffe src/h2load.cc:336 — rps_cb: due requests accumulate in rps_req_pending and start when `session->max_concurrent_streams() - client->rps_req_inflight` allows
type HTTP struct {
	Object   int64         // bytes of the object fetched (RFC 9411's 1, 16, 64, 256 KiB …)
	TLS      bool          // HTTPS, with a certificate made for the probe
	Clients  int           // concurrent connections (h2load -c); default 10
	Rate     float64       // requests a second in all (h2load --rps, per connection); 0: closed loop
	Duration time.Duration // default 10 s, whole seconds
	Port     int           // the server's port; default 18080, or 18443 with TLS
}

func (h HTTP) withDefaults() HTTP {
	if h.Clients == 0 {
		h.Clients = 10
	}
	if h.Duration == 0 {
		h.Duration = 10 * time.Second
	}
	if h.Port == 0 {
		h.Port = 18080
		if h.TLS {
			h.Port = 18443
		}
	}
	return h
}

// Validate reports a setting the probe cannot run with.
func (h HTTP) Validate() error {
	switch {
	case h.Object < 1 || h.Object > 1<<30:
		return fmt.Errorf("http probe: object of %d bytes: give 1 byte to 1G", h.Object)
	case h.Clients < 0 || h.Clients > 10000:
		return fmt.Errorf("http probe: %d connections: give 1 to 10000", h.Clients)
	case h.Rate < 0:
		return fmt.Errorf("http probe: rate %v: give requests a second above 0, or none for as fast as it goes", h.Rate)
	case h.Rate > 1e6*float64(max(1, h.Clients)):
		// upstream: nghttp2/nghttp2@be0491294a63d891bd12b6b1b7e372a45a5d0ffe src/h2load.cc:2651 — --rps above 1e6 a client is refused
		return fmt.Errorf("http probe: rate %v: h2load offers at most 1,000,000 a second a connection; give more connections (parallel) or a lower rate", h.Rate)
	case h.Duration < 0:
		return errors.New("http probe: the duration must be positive")
	}
	return nil
}

// HTTPResult is an HTTP probe's report.
type HTTPResult struct {
	URL      string  `json:"url"`
	Object   int64   `json:"object_bytes"`
	TLS      string  `json:"tls,omitempty"` // "TLSv1.2 ECDHE-ECDSA-AES128-GCM-SHA256"
	Clients  int     `json:"connections"`
	Offered  float64 `json:"offered_per_second,omitempty"` // the fixed rate asked; 0 closed loop
	Seconds  float64 `json:"seconds"`
	Requests int64   `json:"requests"`
	// Succeeded are the requests answered below 400 (2xx and 3xx, as
	// h2load counts success); Failed the others: 4xx and 5xx answers,
	// errors, timeouts and requests never sent.
	//
	// upstream: nghttp2/nghttp2@be0491294a63d891bd12b6b1b7e372a45a5d0ffe src/h2load.cc:974 — on_status_code (the --h1 path) marks a status below 400 status_success, and on_stream_close counts a successful close of such a stream in req_status_success (h2load.cc:1004)
	Succeeded int64   `json:"succeeded"`
	Failed    int64   `json:"failed"`
	PerSecond float64 `json:"transactions_per_second"` // succeeded a second of -D
	BPS       float64 `json:"bps"`                     // bytes received (headers and bodies) a second, in bits
	// TTLB is the time from a request's start (when h2load queued it) to
	// its stream's close, over the requests h2load logged with a status
	// below 400 (those dropped by a disconnect or still open at the end
	// are not logged).
	//
	// upstream: nghttp2/nghttp2@be0491294a63d891bd12b6b1b7e372a45a5d0ffe src/h2load.cc:1024 — the log's third column is stream_close_time - request_time
	TTLB HTTPLatency `json:"ttlb_ms"`
	// TTFBMeanMS is h2load's time to the first byte, a mean over the
	// connections (each from its connect, TLS handshake included), and
	// ConnectMeanMS its connect time.
	TTFBMeanMS    float64 `json:"ttfb_mean_ms"`
	ConnectMeanMS float64 `json:"connect_mean_ms"`
	// Held are the connections to the probe's port established at the
	// server (ss), the most of two counts, half-way through the load and
	// at three quarters (a ramp through a slow firewall may not be done at
	// the first): with many Clients at a low Rate, how many connections
	// the firewall let be made and kept, towards RFC 9411's concurrent
	// connection capacity (sections 7.5 and 7.9). A connection whose
	// state the firewall dropped silently stays established at the
	// server until its next request, which then fails: Failed shows it.
	// nil when the server could not be asked (no ss: not Linux).
	Held *int64 `json:"held_connections,omitempty"`
}

// HTTPLatency are a latency's median, 99th percentile and maximum in
// milliseconds, nearest rank.
type HTTPLatency struct {
	Median float64 `json:"median"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"`
}

// h2load's summary lines.
//
// upstream: nghttp2/nghttp2@be0491294a63d891bd12b6b1b7e372a45a5d0ffe src/h2load.cc:3254 — "finished in", "requests: %d total, %d started, %d done, %d succeeded, %d failed, %d errored, %d timeout", "traffic: … (%d) total", then "time for connect:" and "time to 1st byte:" min, max, mean, sd
// upstream: nghttp2/nghttp2@be0491294a63d891bd12b6b1b7e372a45a5d0ffe src/h2load.cc:885 — "TLS Protocol: " then "Cipher: " once a connection's handshake is done
var (
	h2loadFinishedRE = regexp.MustCompile(`(?m)^finished in ([0-9.]+)(s|ms|us), [0-9.]+ req/s`)
	h2loadRequestsRE = regexp.MustCompile(`(?m)^requests: (\d+) total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout`)
	h2loadTrafficRE  = regexp.MustCompile(`(?m)^traffic: \S+ \((\d+)\) total`)
	h2loadStatRE     = regexp.MustCompile(`(?m)^time (for connect|to 1st byte):\s+(\S+)\s+(\S+)\s+(\S+)`)
	h2loadTLSRE      = regexp.MustCompile(`(?m)^TLS Protocol: (\S+)\s*\nCipher: (\S+)`)
)

// parseH2load reads h2load's summary into r. Its rates are over r.Seconds
// where set (the -D duration, as h2load's own req/s), else over its
// "finished in", which includes starting and stopping the clients.
//
// upstream: nghttp2/nghttp2@be0491294a63d891bd12b6b1b7e372a45a5d0ffe src/h2load.cc:3234 — in timing-based mode rps and bps are over config.duration
func parseH2load(out string, r *HTTPResult) error {
	f := h2loadFinishedRE.FindStringSubmatch(out)
	q := h2loadRequestsRE.FindStringSubmatch(out)
	t := h2loadTrafficRE.FindStringSubmatch(out)
	if f == nil || q == nil || t == nil {
		return fmt.Errorf("h2load's report has no finished, requests or traffic line: %q", lastLines(out, 6))
	}
	secs, err := durationMS(f[1] + f[2])
	if err != nil || secs <= 0 {
		return fmt.Errorf("h2load's report: finished in %s%s", f[1], f[2])
	}
	if r.Seconds <= 0 {
		r.Seconds = secs / 1000
	}
	n := func(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }
	r.Requests, r.Succeeded, r.Failed = n(q[1]), n(q[2]), n(q[3])
	r.PerSecond = float64(r.Succeeded) / r.Seconds
	r.BPS = 8 * float64(n(t[1])) / r.Seconds
	for _, m := range h2loadStatRE.FindAllStringSubmatch(out, -1) {
		mean, err := durationMS(m[4])
		if err != nil {
			return fmt.Errorf("h2load's report: time %s: %w", m[1], err)
		}
		if m[1] == "for connect" {
			r.ConnectMeanMS = mean
		} else {
			r.TTFBMeanMS = mean
		}
	}
	if m := h2loadTLSRE.FindStringSubmatch(out); m != nil {
		r.TLS = m[1] + " " + m[2]
	}
	return nil
}

// durationMS reads h2load's durations ("936us", "1.19ms", "3.00s") in
// milliseconds.
func durationMS(s string) (float64, error) {
	for _, u := range []struct {
		suffix string
		ms     float64
	}{{"us", 1e-3}, {"ms", 1}, {"s", 1000}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("duration %q: %w", s, err)
			}
			return f * u.ms, nil
		}
	}
	return 0, fmt.Errorf("duration %q: no unit", s)
}

// percentileScript prints a per-request log's count, then the median,
// 99th percentile and maximum of its third column (microseconds until the
// end of the response), nearest rank, on the host that has the log: a
// log of millions of requests never crosses the network.
//
// upstream: nghttp2/nghttp2@be0491294a63d891bd12b6b1b7e372a45a5d0ffe src/h2load.cc:2269 — --log-file: "tab-separated columns: start time as microseconds since epoch; HTTP status code; microseconds until end of response"
const percentileScript = `awk -F '\t' '$2 >= 200 && $2 < 400 {print $3}' "$1" | sort -n | awk '{v[NR]=$1} END {if (NR == 0) {print 0; exit} m=int(NR*0.5); if (m < NR*0.5) m++; p=int(NR*0.99); if (p < NR*0.99) p++; print NR, v[m], v[p], v[NR]}'`

// parsePercentiles reads percentileScript's line into l; n is the count.
func parsePercentiles(out string) (n int64, l HTTPLatency, err error) {
	f := strings.Fields(out)
	if len(f) == 1 && f[0] == "0" {
		return 0, l, nil
	}
	if len(f) != 4 {
		return 0, l, fmt.Errorf("request times: %q is not a count and three times", strings.TrimSpace(out))
	}
	n, err = strconv.ParseInt(f[0], 10, 64)
	var us [3]float64
	for i := range us {
		if err == nil {
			us[i], err = strconv.ParseFloat(f[i+1], 64)
		}
	}
	if err != nil {
		return 0, l, fmt.Errorf("request times %q: %w", strings.TrimSpace(out), err)
	}
	return n, HTTPLatency{Median: us[0] / 1000, P99: us[1] / 1000, Max: us[2] / 1000}, nil
}

// nginxConf serves dir/www on addr:port, with TLS 1.2 and 1.3 from dir's
// cert.pem and key.pem; nginx runs in the foreground with a worker a
// core, nothing logged but errors, connections kept open for any number
// of requests, and every file it writes in dir (its compiled-in temporary
// paths, /var/lib/nginx on Debian, would be made and given to its
// workers' user).
//
// upstream: not settled — nginx's directives as nginx 1.22 (Debian 12's nginx-light) documents them (its default ssl_protocols leaves out TLSv1.3); checked at run time: nginx -t on the server before the probe
func nginxConf(dir, addr string, port int, tls bool) string {
	listen := fmt.Sprintf("listen %s:%d;", hostPort(addr), port)
	if tls {
		listen = fmt.Sprintf("listen %s:%d ssl;\n    ssl_protocols TLSv1.2 TLSv1.3;\n    ssl_certificate %s/cert.pem;\n    ssl_certificate_key %s/key.pem;", hostPort(addr), port, dir, dir)
	}
	return fmt.Sprintf(`daemon off;
worker_processes auto;
worker_rlimit_nofile 65536;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 16384; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 100000000;
  keepalive_timeout 75s;
  default_type application/octet-stream;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  server {
    %[2]s
    root %[1]s/www;
  }
}
`, dir, listen)
}

// hostPort brackets an IPv6 address for a listen or URL.
func hostPort(addr string) string {
	if strings.Contains(addr, ":") {
		return "[" + addr + "]"
	}
	return addr
}

// Check makes sure h2load runs on the client and nginx and openssl on
// the server; it returns h2load's version.
func (h HTTP) Check(ctx context.Context, client, server Endpoint) (string, error) {
	if client.Runner == nil || server.Runner == nil {
		return "", errors.New("the http probe needs a way to run commands on both endpoints (set netns or ssh)")
	}
	out, err := client.Runner.Run(ctx, []string{"h2load", "--version"})
	if err != nil {
		return "", toolError(client, "h2load", "nghttp2-client", "nghttp2", err)
	}
	for _, tool := range [][]string{{"nginx", "-v"}, {"openssl", "version"}} {
		if _, err := server.Runner.Run(ctx, tool); err != nil {
			pkg := map[string]string{"nginx": "nginx-light", "openssl": "openssl"}[tool[0]]
			return "", toolError(server, tool[0], pkg, tool[0], err)
		}
	}
	return strings.TrimSpace(firstLine(string(out))), nil
}

// toolError says a tool failed on e, with the package that installs it
// where it is missing.
func toolError(e Endpoint, tool, debian, freebsd string, err error) error {
	if errors.Is(err, ErrNotFound) {
		return &fixError{fmt.Sprintf("%s is not installed on %s (%v): install it there (Debian: apt-get install %s, FreeBSD: pkg install %s)", tool, e, err, debian, freebsd), err}
	}
	return fmt.Errorf("%s on %s: %w", tool, e, err)
}

// Measure serves the object from the server and loads it from the client,
// watching as w asks. The server's files and the client's log are removed
// whatever happens.
func (h HTTP) Measure(ctx context.Context, client, server Endpoint, w Watch) Sample {
	h = h.withDefaults()
	// The objects flow from the server to the client: the sample's
	// sender is the server.
	s := Sample{Probe: "http", Direction: Down, Parallel: h.Clients, ClientCPU: -1, ServerCPU: -1, Started: time.Now()}
	defer func() { s.Elapsed = time.Since(s.Started) }()
	fail := func(err error) Sample {
		s.Failed, s.Reason = true, err.Error()
		return s
	}
	if err := h.Validate(); err != nil {
		return fail(err)
	}
	scheme := "http"
	if h.TLS {
		scheme = "https"
	}
	r := HTTPResult{URL: fmt.Sprintf("%s://%s:%d/%d", scheme, hostPort(server.Addr), h.Port, h.Object), Object: h.Object, Clients: h.Clients, Offered: h.Rate,
		Seconds: float64(h.seconds())}

	srv, err := h.serve(ctx, server)
	if err != nil {
		return fail(err)
	}
	defer srv.stop()
	if err := h.waitReady(ctx, client, server, srv, r.URL); err != nil {
		return fail(err)
	}
	threads := 1
	if out, err := client.Runner.Run(ctx, []string{"nproc"}); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil {
			threads = min(max(1, n), h.Clients)
		}
	}

	out, err := client.Runner.Run(ctx, []string{"mktemp", "/tmp/fwab-h2load.XXXXXX"})
	if err != nil {
		return fail(fmt.Errorf("%s: mktemp for h2load's log: %w", client, err))
	}
	log := strings.TrimSpace(string(out))
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = client.Runner.Run(cctx, []string{"rm", "-f", log})
	}()
	stop := startWatch(ctx, client, server, Iperf3{Duration: h.Duration}, w)
	held := make(chan *int64, 1)
	hctx, hcancel := context.WithCancel(ctx)
	go func() { held <- h.held(hctx, server) }()
	out, err = client.Runner.Run(ctx, h.h2loadArgs(r.URL, log, threads))
	stop(&s)
	hcancel()
	r.Held = <-held
	if err != nil {
		if limit := nofileRE.FindString(string(out) + "\n" + err.Error()); limit != "" {
			return fail(&fixError{fmt.Sprintf("%s cannot open the %d connections asked (%s): raise its hard limit of open files (nofile in /etc/security/limits.conf, or LimitNOFILE for its sshd) to at least %d, or ask for fewer (parallel)", client, h.Clients, limit, h.nofile()), err})
		}
		return fail(fmt.Errorf("h2load on %s: %w", client, err))
	}
	if err := parseH2load(string(out), &r); err != nil {
		return fail(err)
	}
	out, err = client.Runner.Run(ctx, []string{"sh", "-c", percentileScript, "sh", log})
	if err != nil {
		return fail(fmt.Errorf("%s: h2load's request times: %w", client, err))
	}
	var logged int64
	if logged, r.TTLB, err = parsePercentiles(string(out)); err != nil {
		return fail(err)
	}
	s.HTTP = &r
	if logged == 0 && r.Succeeded > 0 {
		return fail(fmt.Errorf("h2load's log on %s has none of the %d requests answered", client, r.Succeeded))
	}
	if r.Succeeded == 0 {
		return fail(fmt.Errorf("no request to %s succeeded (%d sent, %d failed): check that the firewall passes TCP %d from %s", r.URL, r.Requests, r.Failed, h.Port, client.Addr))
	}
	if r.Failed > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("%d of %d requests failed (4xx or 5xx, errored, timed out or never sent)", r.Failed, r.Requests))
	}
	if r.Held != nil && *r.Held < int64(h.Clients) {
		s.Warnings = append(s.Warnings, fmt.Sprintf("at most %d of %d connections were established at the server during the load: the firewall (its state table or a connection limit) or an endpoint did not let the rest be made or kept", *r.Held, h.Clients))
	}
	if h.Rate > 0 && r.PerSecond < 0.99*h.Rate {
		s.Warnings = append(s.Warnings, fmt.Sprintf("%.0f transactions a second against %.0f offered: the rest waited for a busy connection, and their waiting is not in the latency (coordinated omission)", r.PerSecond, h.Rate))
	}
	s.Result = &Iperf3Result{Protocol: "TCP", Flow: Flow{ReceivedBPS: r.BPS, SentBPS: r.BPS, Retransmits: -1}}
	return s
}

// held counts the connections to the probe's port established at the
// server half-way through the load and at three quarters, and returns
// the larger count; nil when it has neither (ctx ended first: h2load
// stopped early; or no ss on the server).
//
// upstream: not settled — iproute2's ss (-H no header, a state and a sport filter, as ss 6.1 on Debian 12 takes them) is not in the sources read; checked at run time: an ss that fails or is missing leaves Held nil, and TestHTTPNetns counts the connections it holds
func (h HTTP) held(ctx context.Context, server Endpoint) *int64 {
	var most *int64
	start := time.Now()
	for _, at := range []time.Duration{h.Duration / 2, h.Duration * 3 / 4} {
		select {
		case <-ctx.Done():
			return most
		case <-time.After(time.Until(start.Add(at))):
		}
		out, err := server.Runner.Run(ctx, []string{"ss", "-H", "-t", "-n", "state", "established", "(", "sport", "=", ":" + strconv.Itoa(h.Port), ")"})
		if err != nil {
			return most
		}
		var n int64
		for line := range strings.Lines(string(out)) {
			if strings.TrimSpace(line) != "" {
				n++
			}
		}
		if most == nil || n > *most {
			most = &n
		}
	}
	return most
}

// nofile is the open files h2load needs: a socket a connection, and a
// few of its own.
func (h HTTP) nofile() int { return h.Clients + 64 }

// nofileRE is the shell's answer when the hard limit of open files is
// below what h2loadArgs asks (dash: "ulimit: error setting limit
// (Operation not permitted)"; bash: "ulimit: open files: cannot modify
// limit: Operation not permitted").
var nofileRE = regexp.MustCompile(`ulimit: [^\n]*(limit|Operation not permitted)[^\n]*`)

// seconds is the load's duration, whole seconds as h2load -D takes it.
func (h HTTP) seconds() int { return max(1, int(h.Duration.Round(time.Second)/time.Second)) }

// h2loadArgs loads url over HTTP/1.1 for the duration on the
// connections, spread over threads, each request's time written to log.
//
// upstream: nghttp2/nghttp2@be0491294a63d891bd12b6b1b7e372a45a5d0ffe src/h2load.cc:2112 — -c clients; :2193 -D duration (timing-based); :2269 --log-file; :2285 --rps per client
//
// More connections than a login's usual 1,024 open files need a higher
// soft limit: h2load then starts from a shell that raises it to nofile
// (up to the hard limit; above it the shell fails and says so).
//
// upstream: not settled — the shell's ulimit -n (dash's and bash's, which set the soft and hard limit) is not in the sources read; checked at run time: its failure is matched by nofileRE and named with the fix
func (h HTTP) h2loadArgs(url, log string, threads int) []string {
	argv := []string{"h2load", "--h1", "-c", strconv.Itoa(h.Clients), "-t", strconv.Itoa(max(1, threads)), "-D", strconv.Itoa(h.seconds()), "--log-file=" + log}
	if h.Rate > 0 {
		argv = append(argv, "--rps="+strconv.FormatFloat(h.Rate/float64(h.Clients), 'f', -1, 64))
	}
	argv = append(argv, url)
	if h.Clients > 512 {
		argv = append([]string{"sh", "-c", `ulimit -n "$0" && exec "$@"`, strconv.Itoa(h.nofile())}, argv...)
	}
	return argv
}

// nginxServer is the probe's nginx on the server: its directory and
// process; stop ends it and removes the directory.
type nginxServer struct {
	dir  string
	proc Process
	stop func()
}

// leftoverScript quits an nginx a killed fwab left on the port ($1) and
// removes its directory.
const leftoverScript = `for d in /tmp/fwab-http.*; do [ -f "$d/nginx.conf" ] && grep -q ":$1[ ;]" "$d/nginx.conf" || continue; nginx -p "$d" -c "$d/nginx.conf" -e "$d/error.log" -s quit 2>/dev/null && sleep 1; rm -rf "$d"; done; true`

// serve makes the object (and the certificate) in a directory of the
// server's own, checks nginx's configuration and starts nginx.
func (h HTTP) serve(ctx context.Context, server Endpoint) (*nginxServer, error) {
	_, _ = server.Runner.Run(ctx, []string{"sh", "-c", leftoverScript, "sh", strconv.Itoa(h.Port)})
	out, err := server.Runner.Run(ctx, []string{"mktemp", "-d", "/tmp/fwab-http.XXXXXX"})
	if err != nil {
		return nil, fmt.Errorf("%s: mktemp -d: %w", server, err)
	}
	dir := strings.TrimSpace(string(out))
	nginx := []string{"nginx", "-p", dir, "-c", dir + "/nginx.conf", "-e", dir + "/error.log"}
	var proc Process
	stop := func() {
		// nginx takes a hang-up for "reload": an SSH session's end does
		// not stop it. -s quit, by its pid file, does, then the process
		// is killed for good measure and the directory goes.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if proc != nil {
			_, _ = server.Runner.Run(cctx, append(slices.Clone(nginx), "-s", "quit"))
			select {
			case <-proc.Done():
			case <-time.After(3 * time.Second):
			}
			_ = proc.Kill()
			<-proc.Done()
		}
		_, _ = server.Runner.Run(cctx, []string{"rm", "-rf", dir})
	}
	// nginx's workers run as an unprivileged user: the directory and the
	// object must be readable by all.
	script := `set -e; chmod 755 "$1"; mkdir -m 755 "$1/www"; truncate -s "$2" "$1/www/$2"; chmod 644 "$1/www/$2"; printf '%s' "$3" > "$1/nginx.conf"`
	if h.TLS {
		script += `; openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1/key.pem" -out "$1/cert.pem" -days 1 -subj /CN=fwab 2>/dev/null`
	}
	conf := nginxConf(dir, server.Addr, h.Port, h.TLS)
	if _, err := server.Runner.Run(ctx, []string{"sh", "-c", script, "sh", dir, strconv.FormatInt(h.Object, 10), conf}); err != nil {
		stop()
		return nil, fmt.Errorf("%s: making the object and nginx's configuration in %s: %w", server, dir, err)
	}
	if _, err := server.Runner.Run(ctx, append(slices.Clone(nginx), "-t", "-q")); err != nil {
		stop()
		return nil, fmt.Errorf("%s: nginx -t: %w", server, err)
	}
	if proc, err = server.Runner.Start(ctx, nginx); err != nil {
		stop()
		return nil, fmt.Errorf("%s: nginx: %w", server, err)
	}
	return &nginxServer{dir: dir, proc: proc, stop: stop}, nil
}

// waitReady fetches url once from the client until it answers, for up to
// 5 s, each try at most 2 s (a firewall that drops the SYN would keep
// one waiting for the kernel's connect timeout): nginx is listening and
// the firewall passes the port. An nginx that exits says why from its
// error log.
func (h HTTP) waitReady(ctx context.Context, client, server Endpoint, srv *nginxServer, url string) error {
	var last string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		select {
		case <-srv.proc.Done():
			out, _ := server.Runner.Run(ctx, []string{"tail", "-n", "3", srv.dir + "/error.log"})
			return fmt.Errorf("nginx on %s exited: %s", server, strings.TrimSpace(string(out)))
		default:
		}
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		out, err := client.Runner.Run(tctx, []string{"h2load", "--h1", "-n", "1", "-c", "1", url})
		cancel()
		if err == nil {
			var r HTTPResult
			if perr := parseH2load(string(out), &r); perr == nil && r.Succeeded == 1 {
				return nil
			}
			last = lastLines(string(out), 3)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not answer from %s within 5 s (%s): check that the firewall passes TCP %d from %s to %s", url, client, last, h.Port, client.Addr, server.Addr)
}
