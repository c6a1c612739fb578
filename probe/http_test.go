package probe

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

func h2loadFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "h2load", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestParseH2load reads h2load 1.52's recorded reports (nginx 1.22 on
// loopback, a 64 KiB object, 4 connections, 3 s).
func TestParseH2load(t *testing.T) {
	var r HTTPResult
	if err := parseH2load(h2loadFixture(t, "h2load-1.52-http-64k.txt"), &r); err != nil {
		t.Fatal(err)
	}
	if r.Seconds != 3 || r.Requests != 51169 || r.Succeeded != 51169 || r.Failed != 0 || r.TLS != "" {
		t.Errorf("http: %+v; want 51169 of 51169 in 3 s, no TLS", r)
	}
	if math.Abs(r.PerSecond-51169/3.0) > 0.01 || math.Abs(r.BPS-8*3366562017/3.0) > 1 {
		t.Errorf("http: %.2f a second, %.0f bit/s; want 17056.33, 8 · 3366562017 / 3", r.PerSecond, r.BPS)
	}
	if r.ConnectMeanMS != 0.077 || r.TTFBMeanMS != 0.679 {
		t.Errorf("http: connect %v ms, first byte %v ms; want 0.077, 0.679", r.ConnectMeanMS, r.TTFBMeanMS)
	}
	var s HTTPResult
	if err := parseH2load(h2loadFixture(t, "h2load-1.52-https-64k.txt"), &s); err != nil {
		t.Fatal(err)
	}
	if s.TLS != "TLSv1.2 ECDHE-ECDSA-AES128-GCM-SHA256" || s.Succeeded != 22672 || s.ConnectMeanMS != 7.74 || s.TTFBMeanMS != 8.5 {
		t.Errorf("https: %+v; want TLSv1.2 ECDHE-ECDSA-AES128-GCM-SHA256, 22672 succeeded, connect 7.74 ms, first byte 8.5 ms", s)
	}
	for _, bad := range []string{"", "starting benchmark...\n", "finished in 3.00s, 1.00 req/s, 1MB/s\n"} {
		if err := parseH2load(bad, &HTTPResult{}); err == nil {
			t.Errorf("parseH2load(%q) = nil, want an error", bad)
		}
	}
	for in, want := range map[string]float64{"936us": 0.936, "1.19ms": 1.19, "3.00s": 3000} {
		if got, err := durationMS(in); err != nil || math.Abs(got-want) > 1e-9 {
			t.Errorf("durationMS(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

// TestPercentileScript runs the script the client host runs on h2load's
// recorded per-request log and checks it against nearest-rank
// percentiles computed here.
func TestPercentileScript(t *testing.T) {
	for _, tool := range []string{"sh", "cut", "sort", "awk"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s is not installed", tool)
		}
	}
	// The recorded log, and failed requests (status 404, and -1 for a
	// stream that failed) the percentiles must leave out.
	log := filepath.Join(t.TempDir(), "log.tsv")
	recorded := h2loadFixture(t, "log-http-64k.tsv")
	os.WriteFile(log, []byte(recorded+strings.Repeat("1796439356504435\t404\t999999\n1796439356504436\t-1\t888888\n", 5)), 0o644)
	out, err := exec.Command("sh", "-c", percentileScript, "sh", log).Output()
	if err != nil {
		t.Fatal(err)
	}
	n, got, err := parsePercentiles(string(out))
	if err != nil {
		t.Fatal(err)
	}
	var us []float64
	for _, line := range strings.Split(strings.TrimSpace(recorded), "\n") {
		f := strings.Split(line, "\t")
		if code, _ := strconv.Atoi(f[1]); code < 200 || code >= 400 {
			continue
		}
		v, _ := strconv.ParseFloat(f[2], 64)
		us = append(us, v)
	}
	sort.Float64s(us)
	rank := func(p float64) float64 { return us[int(math.Ceil(p*float64(len(us))))-1] / 1000 }
	want := HTTPLatency{Median: rank(0.5), P99: rank(0.99), Max: us[len(us)-1] / 1000}
	if n != int64(len(us)) || got != want {
		t.Errorf("percentiles of %d requests = %v, %+v; want %d, %+v", len(us), n, got, len(us), want)
	}
	empty := filepath.Join(t.TempDir(), "empty.tsv")
	os.WriteFile(empty, nil, 0o644)
	out, _ = exec.Command("sh", "-c", percentileScript, "sh", empty).Output()
	if n, _, err := parsePercentiles(string(out)); n != 0 || err != nil {
		t.Errorf("an empty log: %d requests, %v; want 0, nil", n, err)
	}
}

func TestHTTPCommandLines(t *testing.T) {
	h := HTTP{Object: 65536, Clients: 10, Rate: 1000, Duration: 10 * time.Second}.withDefaults()
	want := []string{"h2load", "--h1", "-c", "10", "-t", "2", "-D", "10", "--log-file=/tmp/log", "--rps=100", "http://198.19.1.10:18080/65536"}
	if got := h.h2loadArgs("http://198.19.1.10:18080/65536", "/tmp/log", 2); !slices.Equal(got, want) {
		t.Errorf("h2loadArgs = %q, want %q", got, want)
	}
	h.Rate = 0
	if got := h.h2loadArgs("u", "l", 1); slices.ContainsFunc(got, func(a string) bool { return strings.HasPrefix(a, "--rps") }) {
		t.Errorf("closed loop: %q has --rps", got)
	}
	// Thousands of connections: h2load starts with its open files raised
	// to a socket each and some; the shell really raises them.
	many := HTTP{Object: 1024, Clients: 5000, Rate: 500}.withDefaults()
	got := many.h2loadArgs("u", "l", 2)
	if want := []string{"sh", "-c", `ulimit -n "$0" && exec "$@"`, "5064", "h2load"}; !slices.Equal(got[:5], want) || !slices.Contains(got, "--rps=0.1") {
		t.Errorf("5000 connections: %q, want it to start with %q and ask --rps=0.1", got, want)
	}
	if out, err := exec.Command(got[0], append(got[1:4], "sh", "-c", "ulimit -n")...).CombinedOutput(); err == nil && strings.TrimSpace(string(out)) != "5064" {
		t.Errorf("the shell set h2load's open files to %q, want 5064", out)
	}
	// What dash and bash say when the hard limit is lower.
	for _, msg := range []string{"5064: 1: ulimit: error setting limit (Operation not permitted)", "bash: line 1: ulimit: open files: cannot modify limit: Operation not permitted"} {
		if nofileRE.FindString(msg) == "" {
			t.Errorf("nofileRE does not see %q", msg)
		}
	}
	conf := nginxConf("/tmp/fwab-http.x", "198.19.1.10", 18443, true)
	for _, want := range []string{"listen 198.19.1.10:18443 ssl;", "ssl_protocols TLSv1.2 TLSv1.3;", "ssl_certificate /tmp/fwab-http.x/cert.pem;", "root /tmp/fwab-http.x/www;", "daemon off;", "access_log off;", "client_body_temp_path /tmp/fwab-http.x/body;"} {
		if !strings.Contains(conf, want) {
			t.Errorf("nginx.conf lacks %q:\n%s", want, conf)
		}
	}
	if conf := nginxConf("/d", "2001:db8::1", 18080, false); !strings.Contains(conf, "listen [2001:db8::1]:18080;") || strings.Contains(conf, "ssl") {
		t.Errorf("IPv6 HTTP nginx.conf:\n%s", conf)
	}
	for _, bad := range []HTTP{{Object: 0}, {Object: 2 << 30}, {Object: 1, Clients: -1}, {Object: 1, Rate: -1}, {Object: 1, Clients: 2, Rate: 3e6}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", bad)
		}
	}
}

// TestHTTPNetns loads nginx in one namespace from h2load in another across
// a veth: every request answered, the figures h2load's, the server's
// directory and the client's log removed; an object nginx does not have
// fails every request, and the probe says so.
func TestHTTPNetns(t *testing.T) {
	for _, tool := range []string{"h2load", "nginx", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s is not installed (make setup installs nghttp2-client, nginx-light and openssl)", tool)
		}
	}
	client, server, _ := netnsPair(t)
	h := HTTP{Object: 16 << 10, Clients: 4, Duration: time.Second}
	if _, err := h.Check(t.Context(), client, server); err != nil {
		t.Fatal(err)
	}
	for _, tls := range []bool{false, true} {
		h.TLS = tls
		s := h.Measure(t.Context(), client, server, Watch{Ping: true})
		if s.Failed {
			t.Fatalf("TLS %v: %s", tls, s.Reason)
		}
		r := s.HTTP
		t.Logf("TLS %v: %.0f a second, %.0f Mbit/s, TTLB median %.3f ms p99 %.3f ms, first byte %.3f ms, %s", tls, r.PerSecond, r.BPS/1e6, r.TTLB.Median, r.TTLB.P99, r.TTFBMeanMS, r.TLS)
		if r.Succeeded == 0 || r.Failed != 0 || r.PerSecond <= 0 || r.TTLB.Median <= 0 || r.TTLB.P99 < r.TTLB.Median || r.TTLB.Max < r.TTLB.P99 {
			t.Errorf("TLS %v: %+v; want requests answered with ordered latencies", tls, r)
		}
		if (r.TLS != "") != tls {
			t.Errorf("TLS %v: the report says %q", tls, r.TLS)
		}
		if s.BitsPerSecond() < float64(r.Succeeded)*8*16384 {
			t.Errorf("TLS %v: %.0f bit/s carries less than the %d objects answered", tls, s.BitsPerSecond(), r.Succeeded)
		}
		if s.Ping == nil || s.Ping.Received == 0 {
			t.Errorf("TLS %v: no ping under load", tls)
		}
		if r.Held == nil || *r.Held != 4 {
			t.Errorf("TLS %v: %v connections held at the server, want the 4 asked", tls, r.Held)
		}
	}
	// Concurrent connections: 1,200 held open at 120 requests a second
	// in all (more sockets than a login's usual 1,024 open files), each
	// established at the server.
	held := HTTP{Object: 1024, Clients: 1200, Rate: 120, Duration: 2 * time.Second}.Measure(t.Context(), client, server, Watch{})
	if held.Failed || held.HTTP.Held == nil || *held.HTTP.Held != 1200 || held.HTTP.Failed != 0 {
		t.Errorf("1,200 connections at 120 a second: failed %v (%s), %+v; want all 1,200 held and no request failed", held.Failed, held.Reason, held.HTTP)
	}
	for _, e := range []Endpoint{client, server} {
		out, _ := e.Runner.Run(t.Context(), []string{"sh", "-c", "ls -d /tmp/fwab-http.* /tmp/fwab-h2load.* 2>/dev/null || true"})
		if strings.TrimSpace(string(out)) != "" {
			t.Errorf("%s keeps %s", e.Name, out)
		}
	}
}
