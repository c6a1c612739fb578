package configxml

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// OPNsense's IPsec connections take a proposal only from the option list of
// the field type IPsecProposalField (Swanctl.xml: Connection/proposals is
// phase 1, child/esp_proposals phase 2); a value outside it fails the model's
// validation and is never written by the GUI or the API. The list is a few
// literal groups plus generated ENC-INTEG-DH combinations, and it grew
// between releases. opnProposals rebuilds it per release; the test
// TestUpstreamProposalTable holds it against the upstream source.
//
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IPsec/Swanctl.xml:12 — `IPsecProposalField` for Connection proposals, phase 1
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IPsec/Swanctl.xml:248 — `IPsecProposalField` for child esp_proposals, phase 2

// opnProposalList is what one release's IPsecProposalField lists literally.
type opnProposalList struct {
	release  string
	aead1    []string // AeadPhase1
	aead2    []string // AeadPhase2
	insecure []string // "Commonly used, but insecure cipher suites"
}

// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IPsec/FieldTypes/IPsecProposalField.php:117 — `'aes256-sha256-modp2048' => null`, first of the "Commonly used AES" group, the same in 24.7–26.7
var opnCommonAES = []string{
	"aes256-sha256-modp2048", "aes256-sha512-modp2048", "aes128-sha256-modp2048", "aes128-sha512-modp2048",
	"aes256-sha256-modp4096", "aes256-sha512-modp4096", "aes256-sha256-ecp521", "aes256-sha512-ecp521",
}

// gcmPhase1 is the AEAD phase 1 list of 24.7 and 25.7: AES-GCM with a PRF.
// upstream: opnsense-core 24.7 src/opnsense/mvc/app/models/OPNsense/IPsec/FieldTypes/IPsecProposalField.php:60 — `'aes256gcm16-sha256-modp2048' => null`
var gcmPhase1 = combine([]string{"aes256gcm16", "aes128gcm16"}, []string{"sha256", "sha512"}, []string{"modp2048", "ecp521", "x25519", "x448"})

// gcmPhase2 is the AEAD phase 2 list of 24.7: AES-GCM with PFS only.
// upstream: opnsense-core 24.7 src/opnsense/mvc/app/models/OPNsense/IPsec/FieldTypes/IPsecProposalField.php:82 — `'aes256gcm16-modp2048' => null`
var gcmPhase2 = combine([]string{"aes256gcm16", "aes128gcm16"}, nil, []string{"modp2048", "ecp521", "x25519", "x448"})

var opn247Insecure = []string{
	"aes256-sha1-modp2048", "aes128-sha1-modp2048", "aes256-sha1-modp4096", "aes256-sha1-ecp521",
	"aes256-sha512-modp1024", "aes256-sha256", "null",
}

// opnProposalLists, newest first. Releases between the ones read upstream
// (25.1, 25.4) are not settled by upstream: they get the older list, so a
// proposal it lacks is refused before the sweep rather than risked.
var opnProposalLists = []opnProposalList{
	{
		// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IPsec/FieldTypes/IPsecProposalField.php:76 — `'chacha20poly1305-sha256-x25519'` added to AeadPhase1 in 26.1 (26.7 is the same file)
		// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IPsec/FieldTypes/IPsecProposalField.php:99 — `'chacha20poly1305' => 'chacha20poly1305 [no PFS]'` added to AeadPhase2 in 26.1
		// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IPsec/FieldTypes/IPsecProposalField.php:132 — `'aes192-sha1-modp2048'` added to the insecure group in 26.1
		release: "26.1",
		aead1:   append(slices.Clone(gcmPhase1), combine([]string{"chacha20poly1305"}, []string{"sha256", "sha384", "sha512"}, []string{"x25519", "x448"})...),
		aead2:   append(slices.Clone(gcmPhase2), "aes256gcm16", "chacha20poly1305-x25519", "chacha20poly1305-x448", "chacha20poly1305"),
		insecure: append(slices.Clone(opn247Insecure), "aes256-sha256-modp1024", "aes256-sha1",
			"aes192-sha1-modp2048", "aes256-sha256-modp1536", "aes128-sha256-modp1536", "aes256gcm16-sha256-modp1536"),
	},
	{
		// upstream: opnsense-core 25.7 src/opnsense/mvc/app/models/OPNsense/IPsec/FieldTypes/IPsecProposalField.php:90 — `'aes256gcm16' => 'aes256gcm16'`, ESP without PFS, new in 25.7
		// upstream: opnsense-core 25.7 src/opnsense/mvc/app/models/OPNsense/IPsec/FieldTypes/IPsecProposalField.php:128 — `'aes256-sha1' => 'aes256-sha1'` new in 25.7
		release:  "25.7",
		aead1:    gcmPhase1,
		aead2:    append(slices.Clone(gcmPhase2), "aes256gcm16"),
		insecure: append(slices.Clone(opn247Insecure), "aes256-sha256-modp1024", "aes256-sha1"),
	},
	{
		// upstream: opnsense-core 24.7 src/opnsense/mvc/app/models/OPNsense/IPsec/FieldTypes/IPsecProposalField.php:126 — `'aes256-sha256' => 'aes256-sha256'`, the only phase 2 proposal without PFS in 24.7
		release:  "24.7",
		aead1:    gcmPhase1,
		aead2:    gcmPhase2,
		insecure: opn247Insecure,
	},
}

// The generated part, the same in 24.7–26.7: every ENC-INTEG-DH; in phase 2
// an AES-GCM cipher is offered both as ENC-DH and as ENC-INTEG-DH.
//
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IPsec/FieldTypes/IPsecProposalField.php:180 — `foreach (['aes128', 'aes192', 'aes256', 'aes128gcm16', 'aes192gcm16', 'aes256gcm16'] as $encalg)`
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IPsec/FieldTypes/IPsecProposalField.php:181 — `foreach (['sha256', 'sha384', 'sha512', 'aesxcbc'] as $intalg)`
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IPsec/FieldTypes/IPsecProposalField.php:162 — `$dhgroups = [` modp2048 … x448
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IPsec/FieldTypes/IPsecProposalField.php:184 — `if (strpos($encalg, 'gcm') !== false && $this->phase != '1')`
var (
	opnGenEncs   = []string{"aes128", "aes192", "aes256", "aes128gcm16", "aes192gcm16", "aes256gcm16"}
	opnGenIntegs = []string{"sha256", "sha384", "sha512", "aesxcbc"}
	opnGenDH     = []string{"modp2048", "modp3072", "modp4096", "modp6144", "modp8192", "ecp224", "ecp256", "ecp384", "ecp521",
		"ecp224bp", "ecp256bp", "ecp384bp", "ecp512bp", "x25519", "x448"}
)

// combine joins every enc with every integ (none when integs is nil) and dh.
func combine(encs, integs, dhs []string) []string {
	if integs == nil {
		integs = []string{""}
	}
	var out []string
	for _, e := range encs {
		for _, i := range integs {
			for _, d := range dhs {
				out = append(out, Algos{Enc: e, Integ: i, DH: d}.String())
			}
		}
	}
	return out
}

var (
	opnProposalMu    sync.Mutex
	opnProposalCache = map[string]map[string]bool{}
)

// opnProposalListFor picks the list of the newest release read upstream
// that is not newer than version; unknown versions count as current.
func opnProposalListFor(version string) opnProposalList {
	v, err := parseVersion(version)
	for _, l := range opnProposalLists {
		if err != nil || v.atLeast(mustVersion(l.release)) {
			return l
		}
	}
	return opnProposalLists[len(opnProposalLists)-1]
}

// opnProposals is the set of proposals OPNsense version offers for phase 1
// (IKE) or phase 2 (ESP).
func opnProposals(version string, phase1 bool) map[string]bool {
	l := opnProposalListFor(version)
	key := fmt.Sprintf("%s/%v", l.release, phase1)
	opnProposalMu.Lock()
	defer opnProposalMu.Unlock()
	if s, ok := opnProposalCache[key]; ok {
		return s
	}
	s := map[string]bool{"default": true}
	aead := l.aead2
	if phase1 {
		aead = l.aead1
	}
	for _, group := range [][]string{opnCommonAES, aead, l.insecure} {
		for _, p := range group {
			s[p] = true
		}
	}
	for _, e := range opnGenEncs {
		for _, i := range opnGenIntegs {
			for _, d := range opnGenDH {
				s[e+"-"+i+"-"+d] = true
				if strings.Contains(e, "gcm") && !phase1 {
					s[e+"-"+d] = true
				}
			}
		}
	}
	opnProposalCache[key] = s
	return s
}

// checkOPNProposal refuses a proposal the version's Swanctl model does not
// offer, naming the version and the offers closest to what was asked.
func (c *Config) checkOPNProposal(p Proposal) error {
	shown := c.product.Version
	if shown == "" {
		shown = "(version unknown, taken as " + opnProposalListFor("").release + " or later)"
	}
	for _, phase := range []struct {
		name   string
		field  string
		a      Algos
		phase1 bool
	}{
		{"IKE (phase 1)", "Connection proposals", p.IKE, true},
		{"ESP (phase 2)", "child esp_proposals", p.ESP, false},
	} {
		offered := opnProposals(c.product.Version, phase.phase1)
		if offered[phase.a.String()] {
			continue
		}
		var near []string
		for o := range offered {
			if a, err := parseAlgos(o, phase.phase1); err == nil && a.Enc == phase.a.Enc && a.Integ == phase.a.Integ {
				near = append(near, o)
			}
		}
		slices.Sort(near)
		hint := "; with " + Algos{Enc: phase.a.Enc, Integ: phase.a.Integ}.String() + " it offers: " + strings.Join(near, ", ")
		if len(near) == 0 {
			var encs []string
			for o := range offered {
				if a, err := parseAlgos(o, phase.phase1); err == nil && !slices.Contains(encs, a.Enc) {
					encs = append(encs, a.Enc)
				}
			}
			slices.Sort(encs)
			hint = "; its ciphers are: " + strings.Join(encs, ", ")
		}
		if !phase.phase1 {
			var noPFS []string
			for o := range offered {
				if a, err := parseAlgos(o, false); err == nil && a.DH == "" {
					noPFS = append(noPFS, o)
				}
			}
			slices.Sort(noPFS)
			hint += "; without PFS only: " + strings.Join(noPFS, ", ")
		} else if p.IKE == defaultIKE(p.ESP) {
			hint += "; name the IKE proposal as IKE/ESP"
		}
		return fmt.Errorf("%s proposal %s is not offered by OPNsense %s (Swanctl %s)%s", phase.name, phase.a, shown, phase.field, hint)
	}
	return nil
}
