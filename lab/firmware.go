package lab

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

//go:embed assets/firmware.yaml
var defaultProfiles []byte

// Profile is one firmware version the emulated pfSense can run.
type Profile struct {
	Version  string    `yaml:"version"`
	FreeBSD  string    `yaml:"freebsd,omitempty"` // kernel release uname prints
	Slowdown *Slowdown `yaml:"slowdown,omitempty"`
}

// Slowdown is an injected, documented forwarding rate cap (tc tbf on both of
// the DUT's interfaces). Give rate_mbit, or percent (with baseline_mbit, or
// without it to have the lab measure the baseline when the profile is
// entered).
type Slowdown struct {
	RateMbit     float64 `yaml:"rate_mbit,omitempty"`
	Percent      float64 `yaml:"percent,omitempty"`
	BaselineMbit float64 `yaml:"baseline_mbit,omitempty"`
}

// DefaultProfiles returns the embedded profiles: 2.7.2, 2.8.0, and 2.8.1
// with a 10 % slowdown.
func DefaultProfiles() []Profile {
	p, err := ParseProfiles(bytes.NewReader(defaultProfiles))
	if err != nil {
		panic("lab: embedded firmware profiles: " + err.Error())
	}
	return p
}

// DefaultProfilesYAML is the embedded profiles file, a starting point for
// --firmware-profiles.
func DefaultProfilesYAML() []byte { return append([]byte(nil), defaultProfiles...) }

// ParseProfiles reads a profiles file: a top-level "profiles" list, oldest
// first. Unknown fields are errors.
func ParseProfiles(r io.Reader) ([]Profile, error) {
	var f struct {
		Profiles []Profile `yaml:"profiles"`
	}
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("firmware profiles: the file is empty; it needs a 'profiles:' list of {version: ...}")
		}
		return nil, fmt.Errorf("firmware profiles: %w", err)
	}
	if len(f.Profiles) == 0 {
		return nil, fmt.Errorf("firmware profiles: no profiles; add a 'profiles:' list of {version: ...}")
	}
	seen := map[string]bool{}
	for i, p := range f.Profiles {
		where := fmt.Sprintf("firmware profiles: profile %d", i+1)
		if p.Version == "" {
			return nil, fmt.Errorf("%s: version is empty", where)
		}
		if strings.ContainsAny(p.Version, " \t\n'\"`$;&|<>\\") {
			return nil, fmt.Errorf("%s: version %q has spaces or shell characters", where, p.Version)
		}
		if seen[p.Version] {
			return nil, fmt.Errorf("%s: version %s is listed twice", where, p.Version)
		}
		seen[p.Version] = true
		if s := p.Slowdown; s != nil {
			switch {
			case s.RateMbit < 0 || s.Percent < 0 || s.BaselineMbit < 0:
				return nil, fmt.Errorf("%s (%s): slowdown values must not be negative", where, p.Version)
			case s.RateMbit > 0 && s.Percent > 0:
				return nil, fmt.Errorf("%s (%s): slowdown has both rate_mbit and percent; give one", where, p.Version)
			case s.RateMbit == 0 && s.Percent == 0:
				return nil, fmt.Errorf("%s (%s): slowdown needs rate_mbit or percent", where, p.Version)
			case s.Percent >= 100:
				return nil, fmt.Errorf("%s (%s): slowdown percent %v must be below 100", where, p.Version, s.Percent)
			}
		}
		if f.Profiles[i].FreeBSD == "" {
			f.Profiles[i].FreeBSD = "14.0-CURRENT"
		}
	}
	return f.Profiles, nil
}

// LoadProfiles reads a profiles file; an empty path means the embedded one.
func LoadProfiles(path string) ([]Profile, error) {
	if path == "" {
		return DefaultProfiles(), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := ParseProfiles(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// profile returns the running profile and its index (-1 when /etc/version
// names none).
func (e *Emulator) profile() (Profile, int) {
	v := e.Version()
	for i, p := range e.Profiles {
		if p.Version == v {
			return p, i
		}
	}
	return Profile{Version: v, FreeBSD: "14.0-CURRENT"}, -1
}

// slowdownRate returns the cap for a profile, measuring the baseline once
// (kept in /var/db, which survives reboots) when the profile asks for it.
func (e *Emulator) slowdownRate(ctx context.Context, p Profile) (float64, error) {
	s := p.Slowdown
	if s.RateMbit > 0 {
		return s.RateMbit, nil
	}
	base := s.BaselineMbit
	if base == 0 {
		file := e.path("/var/db/fwab-baseline-" + p.Version)
		if b, err := os.ReadFile(file); err == nil {
			base, _ = strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		}
		if base == 0 {
			m, err := e.DataPlane.MeasureMbit(ctx)
			if err != nil {
				return 0, fmt.Errorf("measure the baseline for the %v%% slowdown of %s: %w", s.Percent, p.Version, err)
			}
			base = m
			_ = writeFileAtomic(file, []byte(strconv.FormatFloat(base, 'f', 1, 64)+"\n"), 0o644)
			e.logger().Info("slowdown baseline measured", "version", p.Version, "mbit", base)
		}
	}
	return base * (100 - s.Percent) / 100, nil
}
