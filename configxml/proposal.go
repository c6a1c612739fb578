package configxml

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Proposal is an IPsec tunnel's phase 1 (IKE) and phase 2 (ESP) algorithms,
// in strongSwan's vocabulary: "aes256-sha256-modp2048" for IKE, "aes128gcm16"
// or "aes256-sha256" for ESP.
type Proposal struct {
	IKE Algos
	ESP Algos
}

// Algos is one proposal: an encryption algorithm, an integrity algorithm
// (empty for AEAD ciphers) and a DH group (IKE; for ESP, PFS, empty if none).
type Algos struct {
	Enc, Integ, DH string
}

func (a Algos) String() string {
	parts := []string{a.Enc}
	if a.Integ != "" {
		parts = append(parts, a.Integ)
	}
	if a.DH != "" {
		parts = append(parts, a.DH)
	}
	return strings.Join(parts, "-")
}

func (p Proposal) String() string {
	if p.IKE == defaultIKE(p.ESP) {
		return p.ESP.String()
	}
	return p.IKE.String() + "/" + p.ESP.String()
}

var (
	aeadEncs  = []string{"aes128gcm8", "aes128gcm12", "aes128gcm16", "aes192gcm8", "aes192gcm12", "aes192gcm16", "aes256gcm8", "aes256gcm12", "aes256gcm16", "chacha20poly1305"}
	plainEncs = []string{"aes128", "aes192", "aes256", "3des", "blowfish", "cast128", "des"}
	integs    = []string{"sha1", "sha256", "sha384", "sha512", "aesxcbc", "md5"}
	dhGroups  = map[string]int{
		"modp768": 1, "modp1024": 2, "modp1536": 5, "modp2048": 14, "modp3072": 15, "modp4096": 16,
		"modp6144": 17, "modp8192": 18, "ecp256": 19, "ecp384": 20, "ecp521": 21, "modp1024s160": 22,
		"modp2048s224": 23, "modp2048s256": 24, "ecp192": 25, "ecp224": 26, "ecp224bp": 27,
		"ecp256bp": 28, "ecp384bp": 29, "ecp512bp": 30, "curve25519": 31, "x25519": 31, "curve448": 32, "x448": 32,
	}
	// dhAliases are second names strongSwan reads as the same group; fwab
	// writes and reports the first, so one group has one canonical form.
	//
	// upstream: strongswan/strongswan@00520b3ae8c1a3d306fa7c829517bbbc3e183b06 src/libstrongswan/crypto/proposal/proposal_keywords_static.txt:174 — `curve25519, KEY_EXCHANGE_METHOD, CURVE_25519`, then x25519 (175), curve448 and x448 (176, 177) with CURVE_448
	dhAliases = map[string]string{"curve25519": "x25519", "curve448": "x448"}
)

func isAEAD(enc string) bool { return slices.Contains(aeadEncs, enc) }

// defaultIKE is the phase 1 fwab pairs with an ESP proposal given alone: the
// same cipher, SHA-256 as PRF for AEAD ciphers, and DH group 14.
func defaultIKE(esp Algos) Algos {
	ike := Algos{Enc: esp.Enc, Integ: esp.Integ, DH: "modp2048"}
	if isAEAD(esp.Enc) {
		ike.Integ = "sha256"
	}
	return ike
}

// ParseProposal parses "ESP" or "IKE/ESP".
func ParseProposal(s string) (Proposal, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	ikeText, espText, both := strings.Cut(s, "/")
	if !both {
		espText, ikeText = ikeText, ""
	}
	esp, err := parseAlgos(espText, false)
	if err != nil {
		return Proposal{}, fmt.Errorf("ESP proposal %q: %w", espText, err)
	}
	p := Proposal{ESP: esp, IKE: defaultIKE(esp)}
	if both {
		if p.IKE, err = parseAlgos(ikeText, true); err != nil {
			return Proposal{}, fmt.Errorf("IKE proposal %q: %w", ikeText, err)
		}
	}
	return p, nil
}

func parseAlgos(s string, ike bool) (Algos, error) {
	parts := strings.Split(s, "-")
	a := Algos{Enc: parts[0]}
	if !slices.Contains(aeadEncs, a.Enc) && !slices.Contains(plainEncs, a.Enc) {
		return a, fmt.Errorf("unknown cipher %q; ciphers: %s", a.Enc, strings.Join(append(slices.Clone(plainEncs), aeadEncs...), ", "))
	}
	for _, p := range parts[1:] {
		switch {
		case slices.Contains(integs, p):
			if a.Integ != "" {
				return a, fmt.Errorf("two integrity algorithms")
			}
			a.Integ = p
		case dhGroups[p] != 0:
			if a.DH != "" {
				return a, fmt.Errorf("two DH groups")
			}
			a.DH = cmp.Or(dhAliases[p], p)
		default:
			return a, fmt.Errorf("unknown algorithm %q; integrity: %s; DH groups such as modp2048, ecp256, x25519", p, strings.Join(integs, ", "))
		}
	}
	switch {
	case isAEAD(a.Enc) && a.Integ != "" && !ike:
		return a, fmt.Errorf("%s is an AEAD cipher and takes no integrity algorithm", a.Enc)
	case !isAEAD(a.Enc) && a.Integ == "":
		return a, fmt.Errorf("%s needs an integrity algorithm, e.g. %s-sha256", a.Enc, a.Enc)
	case ike && a.DH == "":
		return a, fmt.Errorf("phase 1 needs a DH group, e.g. %s-modp2048", a)
	case ike && isAEAD(a.Enc) && a.Integ == "":
		a.Integ = "sha256"
	}
	return a, nil
}

// algorithmProblem says why an algorithm is not available on a product
// version, or returns "". Sources: firewall.md A-d (pfSense 2.7 removed 3DES,
// Blowfish, CAST128, MD5 and added ChaCha20-Poly1305) and B-d (OPNsense).
func (c *Config) algorithmProblem(alg string) string {
	weak := map[string]bool{"3des": true, "blowfish": true, "cast128": true, "des": true, "md5": true}
	switch c.flavor {
	case PfSense:
		if alg == "des" {
			return "pfSense never offered single DES"
		}
		if c.productAtLeast("2.7") && weak[alg] {
			return fmt.Sprintf("pfSense 2.7 and later removed %s (3DES, Blowfish, CAST128 and MD5 are gone)", alg)
		}
		if !c.productAtLeast("2.7") && alg == "chacha20poly1305" {
			return "ChaCha20-Poly1305 arrived in pfSense 2.7"
		}
		if strings.Contains(alg, "gcm") && !strings.HasSuffix(alg, "gcm8") && !strings.HasSuffix(alg, "gcm12") && !strings.HasSuffix(alg, "gcm16") {
			return "GCM needs an ICV length: gcm8, gcm12 or gcm16"
		}
	case OPNsense:
		if weak[alg] {
			return fmt.Sprintf("OPNsense's IPsec connections offer no %s (3DES, Blowfish, CAST128, DES and MD5 are only in the legacy tunnels plugin)", alg)
		}
	}
	return ""
}

func (c *Config) checkProposal(p Proposal) error {
	for _, a := range []Algos{p.IKE, p.ESP} {
		for _, alg := range []string{a.Enc, a.Integ} {
			if alg == "" {
				continue
			}
			if why := c.algorithmProblem(alg); why != "" {
				return fmt.Errorf("%s is not valid on %s %s: %s", alg, c.flavor, c.product.Version, why)
			}
		}
	}
	if c.flavor == OPNsense {
		return c.checkOPNProposal(p)
	}
	return nil
}

// pfSense stores a cipher as a name and a key length; for GCM the "key
// length" is the ICV length in bits (firewall.md A-d).
func pfEncryption(enc string) (name, keylen string) {
	switch {
	case enc == "chacha20poly1305", enc == "3des", enc == "cast128", enc == "des":
		return enc, ""
	case enc == "blowfish":
		return enc, "128"
	case strings.Contains(enc, "gcm"):
		base, icv, _ := strings.Cut(enc, "gcm")
		n, _ := strconv.Atoi(icv)
		return base + "gcm", strconv.Itoa(n * 8)
	default: // aes128, aes192, aes256
		return "aes", strings.TrimPrefix(enc, "aes")
	}
}

func pfDecryption(name, keylen string) string {
	switch {
	case name == "aes":
		return "aes" + keylen
	case strings.HasSuffix(name, "gcm"):
		n, _ := strconv.Atoi(keylen)
		return name + strconv.Itoa(n/8)
	}
	return name
}

func dhNumber(dh string) string {
	if n, ok := dhGroups[dh]; ok {
		return strconv.Itoa(n)
	}
	return "0"
}

func dhName(n string) string {
	for name, num := range dhGroups {
		if strconv.Itoa(num) == n && dhAliases[name] == "" {
			return name
		}
	}
	return ""
}

// commonProposals are the ESP proposals the seeds compare.
var commonProposals = []string{
	"aes128gcm16", "aes256gcm16", "chacha20poly1305",
	"aes128-sha1", "aes128-sha256", "aes256-sha256", "aes256-sha512",
	"3des-sha1", "3des-md5", "blowfish-sha1", "cast128-sha1", "aes128-md5",
}

// opnCommonProposals are the common proposals with PFS, or with an explicit
// IKE proposal, that OPNsense's Swanctl model offers where it lacks the bare
// forms (swanctl_proposals.go).
var opnCommonProposals = []string{
	"aes128gcm16-modp2048", "aes256gcm16-modp2048", "aes128-sha256-modp2048", "aes256-sha256-modp2048",
	"chacha20poly1305-sha256-x25519/chacha20poly1305",
}

// Ciphers lists the common ESP proposals a product version accepts.
func Ciphers(f Flavor, productVersion string) ([]string, error) {
	c := &Config{flavor: f}
	if err := c.SetProduct(productVersion); err != nil {
		return nil, err
	}
	candidates := commonProposals
	if f == OPNsense {
		candidates = append(slices.Clone(commonProposals), opnCommonProposals...)
	}
	var out []string
	for _, s := range candidates {
		p, _ := ParseProposal(s)
		if c.checkProposal(p) == nil {
			out = append(out, s)
		}
	}
	return out, nil
}
