package fwapi_test

import (
	"fmt"

	"github.com/fwab/fwab/fwapi"
)

// A fingerprint copied from a browser, from openssl or in plain hex pins the
// same certificate.
func ExampleParseFingerprint() {
	for _, s := range []string{
		"sha256:0f:1e:2d:3c:4b:5a:69:78:87:96:a5:b4:c3:d2:e1:f0:0f:1e:2d:3c:4b:5a:69:78:87:96:a5:b4:c3:d2:e1:f0",
		"0F1E2D3C4B5A69788796A5B4C3D2E1F00F1E2D3C4B5A69788796A5B4C3D2E1F0",
	} {
		sum, err := fwapi.ParseFingerprint(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(fwapi.FormatFingerprint(sum))
	}
	_, err := fwapi.ParseFingerprint("0F1E2D")
	fmt.Println(err)
	// Output:
	// 0F:1E:2D:3C:4B:5A:69:78:87:96:A5:B4:C3:D2:E1:F0:0F:1E:2D:3C:4B:5A:69:78:87:96:A5:B4:C3:D2:E1:F0
	// 0F:1E:2D:3C:4B:5A:69:78:87:96:A5:B4:C3:D2:E1:F0:0F:1E:2D:3C:4B:5A:69:78:87:96:A5:B4:C3:D2:E1:F0
	// fingerprint "0F1E2D" is not a SHA-256 fingerprint: want 64 hex digits, colons allowed
}
