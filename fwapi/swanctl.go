package fwapi

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// ParseSwanctlSAs reads `swanctl --list-sas` and returns the child SAs with
// their negotiated ESP algorithms and byte counters.
func ParseSwanctlSAs(out string) ([]IPsecSA, error) {
	var sas []IPsecSA
	var cur *IPsecSA
	var ike string
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		raw := sc.Text()
		text := strings.TrimSpace(raw)
		if text == "" {
			continue
		}
		indent := len(raw) - len(strings.TrimLeft(raw, " "))
		switch {
		case indent == 0:
			// IKE SA header: "con1000: #4, ESTABLISHED, IKEv2, ..."
			name, _, ok := strings.Cut(text, ": #")
			if !ok {
				return nil, fmt.Errorf("swanctl line %d: %q is not an IKE SA header", line, text)
			}
			ike, cur = name, nil
		case indent >= 2 && strings.Contains(text, ": #"):
			name, rest, _ := strings.Cut(text, ": #")
			sa := IPsecSA{IKE: ike, Name: name}
			for _, f := range strings.Split(rest, ", ") {
				f = strings.TrimSpace(f)
				switch {
				case childSAStates[f]:
					sa.State = f
				case strings.HasPrefix(f, "ESP:") || strings.HasPrefix(f, "AH:"):
					_, algs, _ := strings.Cut(f, ":")
					sa.Proposals = algs
					sa.Encr, sa.Integ = splitESP(algs)
				}
			}
			if sa.State == "" {
				return nil, fmt.Errorf("swanctl line %d: child SA %q has no state", line, name)
			}
			sas = append(sas, sa)
			cur = &sas[len(sas)-1]
		case cur != nil && (strings.HasPrefix(text, "in ") || strings.HasPrefix(text, "out ")):
			n, err := sadBytes(text)
			if err != nil {
				return nil, fmt.Errorf("swanctl line %d: %w", line, err)
			}
			if strings.HasPrefix(text, "in ") {
				cur.BytesIn = n
			} else {
				cur.BytesOut = n
			}
		}
	}
	return sas, sc.Err()
}

// childSAStates are the states swanctl prints for a child SA.
// upstream: strongswan/strongswan@6e07e3f0bdfe722f47687aac257b142844c33653 src/libcharon/sa/child_sa.c:53 — `child_sa_state_names`
var childSAStates = map[string]bool{
	"CREATED": true, "ROUTED": true, "INSTALLING": true, "INSTALLED": true,
	"UPDATING": true, "REKEYING": true, "REKEYED": true, "RETRYING": true,
	"DELETING": true, "DELETED": true, "DESTROYING": true,
}

// splitESP splits "AES_CBC-256/HMAC_SHA2_256_128/MODP_2048" into the
// encryption and integrity algorithms; AEAD ciphers have no integrity part.
func splitESP(algs string) (encr, integ string) {
	parts := strings.Split(algs, "/")
	encr = parts[0]
	for _, p := range parts[1:] {
		if strings.HasPrefix(p, "HMAC_") || strings.HasPrefix(p, "AES_XCBC") || strings.HasPrefix(p, "AES_CMAC") {
			integ = p
		}
	}
	return encr, integ
}

// sadBytes reads the byte count from "in  c4f1a2b3,  91234567 bytes, ...".
func sadBytes(text string) (uint64, error) {
	fields := strings.Split(text, ",")
	if len(fields) < 2 {
		return 0, fmt.Errorf("%q: no byte count", text)
	}
	f := strings.Fields(fields[1])
	if len(f) != 2 || f[1] != "bytes" {
		return 0, fmt.Errorf("%q: no byte count", text)
	}
	n, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: byte count: %w", text, err)
	}
	return n, nil
}
