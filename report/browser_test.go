package report

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gonum.org/v1/plot/plotutil"
)

const chromiumPath = "/usr/bin/chromium"

// chromium runs headless Chromium on the page with extra arguments and
// returns its standard output. The browser and its helpers run in their
// own process group, killed when the test's time is up.
func chromium(t *testing.T, page string, args ...string) []byte {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("headless Chromium is not installed at %s (Debian package chromium; make setup installs it): %v", chromiumPath, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	argv := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + t.TempDir()}, args...)
	argv = append(argv, "file://"+page)
	cmd := exec.CommandContext(ctx, chromiumPath, argv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// TestHTMLInBrowser opens the report in a real browser: the DOM holds the
// five charts with their drawing, and the screenshot shows the medians,
// intervals and lines in the probes' colours.
func TestHTMLInBrowser(t *testing.T) {
	run := loadRun(t, t730Run())
	page := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(page, writeReport(t, run, HTML, Options{Pivot: "blocklist"}), 0o644); err != nil {
		t.Fatal(err)
	}

	dom := string(chromium(t, page, "--dump-dom"))
	if n := strings.Count(dom, "<svg"); n != 5 {
		t.Errorf("the DOM has %d svg elements, want 5", n)
	}
	for _, svg := range strings.Split(dom, "<svg")[1:] {
		svg = svg[:strings.Index(svg, "</svg>")]
		if strings.Count(svg, "<path") < 10 || strings.Count(svg, "<text") < 5 {
			t.Errorf("an svg has %d paths and %d texts: not drawn", strings.Count(svg, "<path"), strings.Count(svg, "<text"))
		}
	}
	for _, want := range []string{"Throughput, probe up", "Throughput, probe down", "Effect of each step", "Throughput over time, probe up", "Throughput over time, probe down"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the DOM lacks the chart %q", want)
		}
	}

	shot := filepath.Join(t.TempDir(), "report.png")
	chromium(t, page, "--screenshot="+shot, "--window-size=1200,4000", "--hide-scrollbars")
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	b := img.Bounds()
	colours := map[[3]uint32]bool{}
	nonWhite := 0
	probeColour := make([]int, 2) // pixels in the colour of probe 0 and probe 1
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			c := [3]uint32{r >> 8, g >> 8, bl >> 8}
			colours[c] = true
			if c != [3]uint32{255, 255, 255} {
				nonWhite++
			}
			for i := range probeColour {
				pr, pg, pb, _ := plotutil.Color(i).RGBA()
				if near(c[0], pr>>8) && near(c[1], pg>>8) && near(c[2], pb>>8) {
					probeColour[i]++
				}
			}
		}
	}
	t.Logf("screenshot %dx%d: %d colours, %d non-white pixels, probe colours %v", b.Dx(), b.Dy(), len(colours), nonWhite, probeColour)
	if len(colours) < 50 || nonWhite < b.Dx()*b.Dy()/50 {
		t.Errorf("the screenshot looks blank: %d colours, %d of %d pixels not white", len(colours), nonWhite, b.Dx()*b.Dy())
	}
	for i, n := range probeColour {
		if n < 2000 {
			t.Errorf("%d pixels in probe %d's colour: its medians, intervals and lines were not drawn", n, i)
		}
	}
}

func near(a, b uint32) bool { return a+6 >= b && b+6 >= a }
