package labtest

import (
	"strings"
	"testing"
)

// TestDriverSuite runs the driver suite against every product version the
// knobs know.
func TestDriverSuite(t *testing.T) {
	for _, v := range Versions {
		t.Run(string(v.Product)+"-"+strings.TrimSuffix(v.Version, "-RELEASE"), func(t *testing.T) {
			t.Parallel()
			s := &Suite{Options: Options{Product: v.Product, Version: v.Version}}
			s.Run(t)
		})
	}
}
