package configxml

// A reader for OPNsense's MVC model definitions (models/**/*.xml) and the
// option lists of the field types fwab writes, read from the unchanged
// upstream source in ../shared/upstream (or $FWAB_UPSTREAM). Test-only: the
// tests below hold what configxml writes against these definitions.

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/beevik/etree"
)

// opnVersions are the OPNsense releases whose core source ../shared/upstream holds.
var opnVersions = []string{"24.7", "25.7", "26.1", "26.7"}

// repoRoot is the directory holding go.mod, found from the test's directory up.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}

// upstreamDir is where the upstream source lives: $FWAB_UPSTREAM, else
// ../shared/upstream beside the repository. The test skips without it.
func upstreamDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("FWAB_UPSTREAM")
	if dir == "" {
		dir = filepath.Join(repoRoot(t), "..", "shared", "upstream")
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Skipf("upstream sources not found at %s: %v (set FWAB_UPSTREAM to the folder that holds opnsense-core/ and pfsense/)", dir, err)
	}
	return dir
}

// mfield is one node of a model: a container, an array (ArrayField and the
// custom array types, whose definitions hold typed children) or a field.
type mfield struct {
	name     string
	typ      string // "" for a plain container
	def      *etree.Element
	array    bool
	children map[string]*mfield
	file     string
}

func (f *mfield) leaf() bool { return f.typ != "" && !f.array }

func (f *mfield) prop(name string) string {
	if e := f.def.SelectElement(name); e != nil {
		return strings.TrimSpace(e.Text())
	}
	return ""
}

// mmodel is one model file: its mount (the config path) and items.
type mmodel struct {
	file  string // path below the version folder
	class string // OPNsense.IPsec.Swanctl
	mount string // OPNsense/Swanctl
	items *mfield
}

// opnModels holds one version's models and the field-type sources beside them.
type opnModels struct {
	version string
	dir     string // .../opnsense-core/VERSION
	models  []*mmodel
	props   map[string]map[string]bool // IPsecProposalField options by phase
}

const modelsDir = "src/opnsense/mvc/app/models"

func loadOPNModels(t testing.TB, up, version string) *opnModels {
	t.Helper()
	dir := filepath.Join(up, "opnsense-core", version)
	root := filepath.Join(dir, modelsDir)
	if _, err := os.Stat(root); err != nil {
		t.Skipf("upstream sources not found at %s: %v", root, err)
	}
	m := &opnModels{version: version, dir: dir}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".xml") {
			return err
		}
		doc := etree.NewDocument()
		if err := doc.ReadFromFile(path); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		r := doc.Root()
		if r == nil || r.Tag != "model" || r.SelectElement("mount") == nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		relModel, _ := filepath.Rel(root, path)
		class := strings.ReplaceAll(strings.TrimSuffix(relModel, ".xml"), string(filepath.Separator), ".")
		mm := &mmodel{
			file:  rel,
			class: class,
			mount: strings.TrimPrefix(strings.TrimSpace(r.SelectElement("mount").Text()), "//"),
			items: buildModel("items", "", r.SelectElement("items"), rel),
		}
		m.models = append(m.models, mm)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.models) == 0 {
		t.Skipf("no MVC models under %s", root)
	}
	return m
}

func buildModel(name, typ string, e *etree.Element, file string) *mfield {
	f := &mfield{name: name, typ: typ, def: e, file: file}
	typedChildren := false
	for _, ch := range e.ChildElements() {
		if ch.SelectAttr("type") != nil {
			typedChildren = true
		}
	}
	if typ != "" && !typedChildren && typ != "ArrayField" {
		return f // a field; its children are properties
	}
	f.array = typ != ""
	f.children = map[string]*mfield{}
	for _, ch := range e.ChildElements() {
		f.children[ch.Tag] = buildModel(ch.Tag, ch.SelectAttrValue("type", ""), ch, file)
	}
	return f
}

// modelFor returns the model mounted at or above path (slash-separated from
// the root element's children), and the rest of the path below the mount.
func (m *opnModels) modelFor(path string) (*mmodel, string) {
	var best *mmodel
	for _, mm := range m.models {
		if path == mm.mount || strings.HasPrefix(path, mm.mount+"/") {
			if best == nil || len(mm.mount) > len(best.mount) {
				best = mm
			}
		}
	}
	if best == nil {
		return nil, ""
	}
	return best, strings.TrimPrefix(strings.TrimPrefix(path, best.mount), "/")
}

func (m *opnModels) byClass(class string) *mmodel {
	for _, mm := range m.models {
		if mm.class == class {
			return mm
		}
	}
	return nil
}

// resolve finds the model field a config element stands for, walking the
// element's ancestors below the mount. Array items are the array's tag.
func (m *opnModels) resolve(e *etree.Element) (*mmodel, *mfield, error) {
	var chain []*etree.Element
	for x := e; x != nil && x.Parent() != nil && x.Parent().Parent() != nil; x = x.Parent() {
		chain = append([]*etree.Element{x}, chain...)
	}
	var tags []string
	for _, x := range chain {
		tags = append(tags, x.Tag)
	}
	path := strings.Join(tags, "/")
	mm, _ := m.modelFor(path)
	if mm == nil {
		for _, other := range m.models {
			if strings.HasPrefix(other.mount, path+"/") {
				return nil, nil, nil // a container above a mount
			}
		}
		return nil, nil, fmt.Errorf("%s: no OPNsense %s model is mounted there", path, m.version)
	}
	depth := len(strings.Split(mm.mount, "/"))
	cur := mm.items
	for _, x := range chain[depth:] {
		if cur.children == nil {
			return mm, nil, fmt.Errorf("%s: %s (%s) is a field and has no child %q", path, cur.name, cur.typ, x.Tag)
		}
		next := cur.children[x.Tag]
		if next == nil {
			return mm, nil, fmt.Errorf("%s: %s has no %q in %s (OPNsense %s)", path, cur.name, x.Tag, mm.file, m.version)
		}
		cur = next
	}
	return mm, cur, nil
}

// ipsecProposals computes the options of IPsecProposalField for a phase the
// way actionPostLoadingEvent builds them: the literal keys of commonOptions
// and the phase's AEAD list, then the generated ENC-INTEG-DH combinations
// (phase 2 drops INTEG for GCM and adds the ENC-INTEG-DH form after them).
func (m *opnModels) ipsecProposals(t testing.TB, phase string) map[string]bool {
	t.Helper()
	if p, ok := m.props[phase]; ok {
		return p
	}
	if m.props == nil {
		m.props = map[string]map[string]bool{}
	}
	m.props[phase] = m.readIPsecProposals(t, phase)
	return m.props[phase]
}

func (m *opnModels) readIPsecProposals(t testing.TB, phase string) map[string]bool {
	src, err := os.ReadFile(filepath.Join(m.dir, modelsDir, "OPNsense/IPsec/FieldTypes/IPsecProposalField.php"))
	if err != nil {
		t.Fatalf("OPNsense %s: %v", m.version, err)
	}
	text := string(src)
	body := func(fn string) string {
		i := strings.Index(text, "function "+fn+"()")
		if i < 0 {
			t.Fatalf("OPNsense %s IPsecProposalField.php: no function %s", m.version, fn)
		}
		rest := text[i:]
		if j := strings.Index(rest[1:], "function "); j >= 0 {
			rest = rest[:j+1]
		}
		return rest
	}
	key := regexp.MustCompile(`'([A-Za-z0-9-]+)'\s*=>`)
	out := map[string]bool{}
	aead := "AeadPhase2"
	if phase == "1" {
		aead = "AeadPhase1"
	}
	for _, fn := range []string{"commonOptions", aead} {
		for _, k := range key.FindAllStringSubmatch(body(fn), -1) {
			out[k[1]] = true
		}
	}
	gen := body("actionPostLoadingEvent")
	list := func(re string) []string {
		mt := regexp.MustCompile(re).FindStringSubmatch(gen)
		if mt == nil {
			t.Fatalf("OPNsense %s IPsecProposalField.php: %s not found", m.version, re)
		}
		var items []string
		for _, q := range regexp.MustCompile(`'([^']+)'`).FindAllStringSubmatch(mt[1], -1) {
			items = append(items, q[1])
		}
		return items
	}
	encs := list(`foreach \(\[([^\]]*)\] as \$encalg\)`)
	ints := list(`foreach \(\[([^\]]*)\] as \$intalg\)`)
	var dhs []string
	for _, k := range key.FindAllStringSubmatch(regexp.MustCompile(`(?s)\$dhgroups = \[(.*?)\];`).FindString(gen), -1) {
		dhs = append(dhs, k[1])
	}
	for _, e := range encs {
		for _, i := range ints {
			for _, d := range dhs {
				if strings.Contains(e, "gcm") && phase != "1" {
					out[e+"-"+i+"-"+d] = true
					out[e+"-"+d] = true
					continue
				}
				out[e+"-"+i+"-"+d] = true
			}
		}
	}
	return out
}

// checkField holds one written value against its field's definition.
func (m *opnModels) checkField(t testing.TB, doc *etree.Element, f *mfield, value string) error {
	t.Helper()
	if f.def.SelectAttrValue("volatile", "") == "true" {
		return fmt.Errorf("is volatile (%s): OPNsense never stores it", f.file)
	}
	if f.typ == "LegacyLinkField" {
		return fmt.Errorf("is a read-only LegacyLinkField to %s (%s): writing it changes nothing; write <%s> instead",
			f.prop("Source"), f.file, strings.ReplaceAll(f.prop("Source"), ".", "><"))
	}
	if value == "" {
		if f.prop("Required") == "Y" {
			return fmt.Errorf("is empty, but Required in %s", f.file)
		}
		return nil
	}
	values := []string{value}
	if f.prop("Multiple") == "Y" || f.prop("AsList") == "Y" {
		values = strings.Split(value, ",")
	}
	for _, v := range values {
		if err := m.checkOne(t, doc, f, v); err != nil {
			return fmt.Errorf("%q %w", v, err)
		}
	}
	return nil
}

func (m *opnModels) checkOne(t testing.TB, doc *etree.Element, f *mfield, v string) error {
	intRange := func() error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("is not an integer (%s %s)", f.typ, f.file)
		}
		if lo := f.prop("MinimumValue"); lo != "" {
			if l, _ := strconv.ParseInt(lo, 10, 64); n < l {
				return fmt.Errorf("is below MinimumValue %s (%s)", lo, f.file)
			}
		}
		if hi := f.prop("MaximumValue"); hi != "" {
			if h, _ := strconv.ParseInt(hi, 10, 64); n > h {
				return fmt.Errorf("is above MaximumValue %s (%s)", hi, f.file)
			}
		}
		return nil
	}
	switch f.typ {
	case "BooleanField":
		if v != "0" && v != "1" {
			return fmt.Errorf("is not 0 or 1 (BooleanField, %s)", f.file)
		}
	case "IntegerField", ".\\FilterSequenceField":
		return intRange()
	case "NumericField":
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return fmt.Errorf("is not a number (%s)", f.file)
		}
	case "OptionField":
		var allowed []string
		if ov := f.def.SelectElement("OptionValues"); ov != nil {
			for _, o := range ov.ChildElements() {
				allowed = append(allowed, o.SelectAttrValue("value", o.Tag))
			}
		}
		if !slices.Contains(allowed, v) {
			return fmt.Errorf("is not among the OptionValues %v (%s)", allowed, f.file)
		}
	case ".\\IPsecProposalField":
		if !m.ipsecProposals(t, f.prop("Phase"))[v] {
			return fmt.Errorf("is not an option of IPsecProposalField phase %s (OPNsense %s)", f.prop("Phase"), m.version)
		}
	case "InterfaceField":
		if ifs := doc.SelectElement("interfaces"); ifs == nil || ifs.SelectElement(v) == nil {
			return fmt.Errorf("is not an interface of this config (InterfaceField, %s)", f.file)
		}
	case "NetworkField", "NetworkAliasField":
		if v == "any" && (f.typ == "NetworkAliasField" || f.prop("WildcardEnabled") != "N") {
			return nil
		}
		if _, err := netip.ParsePrefix(v); err == nil && f.prop("NetMaskAllowed") != "N" && f.prop("NetmaskAllowed") != "N" {
			return nil
		}
		if _, err := netip.ParseAddr(v); err == nil && f.prop("NetMaskRequired") != "Y" {
			return nil
		}
		if f.typ == "NetworkAliasField" && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`).MatchString(v) {
			return nil // an alias name
		}
		return fmt.Errorf("is not an address or network %s allows (%s)", f.typ, f.file)
	case "PortField":
		if n, err := strconv.Atoi(v); err == nil && n >= 1 && n <= 65535 {
			return nil
		}
		return fmt.Errorf("is not a port (PortField, %s)", f.file)
	case "ModelRelationField":
		// The value names an item of any of the field's source models.
		var searched []string
		for _, src := range f.def.FindElements("Model/*") {
			ref := m.byClass(strings.TrimSpace(childText(src, "source")))
			if ref == nil {
				t.Logf("OPNsense %s %s: ModelRelationField to %s not checked (model not in upstream copy)", m.version, f.name, childText(src, "source"))
				return nil
			}
			items := strings.ReplaceAll(strings.TrimSpace(childText(src, "items")), ".", "/")
			for _, it := range doc.FindElements(ref.mount + "/" + items) {
				if it.SelectAttrValue("uuid", "") == v {
					return nil
				}
			}
			searched = append(searched, ref.mount+"/"+items)
		}
		return fmt.Errorf("names no item of %s in this config (ModelRelationField, %s)", strings.Join(searched, " or "), f.file)
	case ".\\IKEAddressField", ".\\IKEAdressField": // 24.7 spells it IKEAdressField
		if _, err := netip.ParseAddr(v); err == nil {
			return nil
		}
		if regexp.MustCompile(`^[A-Za-z0-9.-]+$`).MatchString(v) {
			return nil // a host name
		}
		return fmt.Errorf("is not an address or host name (IKEAddressField, %s)", f.file)
	case "TextField", "StrictTextField", "DescriptionField":
	case "ProtocolField":
		// Its options come from /etc/protocols on the box: not settled by
		// the model; fwab writes TCP, which FreeBSD's protocols file has.
		if !regexp.MustCompile(`^[A-Z0-9/-]+$|^any$`).MatchString(v) {
			return fmt.Errorf("is not a protocol name (ProtocolField, %s)", f.file)
		}
	default:
		t.Logf("OPNsense %s: field type %s (%s) not checked", m.version, f.typ, f.name)
	}
	if mask := f.prop("Mask"); mask != "" {
		re, err := phpRegexp(mask)
		if err != nil {
			t.Logf("OPNsense %s %s: Mask %s not checked: %v", m.version, f.name, mask, err)
		} else if !re.MatchString(v) {
			return fmt.Errorf("does not match the Mask %s (%s)", mask, f.file)
		}
	}
	return nil
}

// phpRegexp turns a PCRE pattern with delimiters, "/^…$/u", into Go's form.
func phpRegexp(p string) (*regexp.Regexp, error) {
	if len(p) < 2 || p[0] != '/' {
		return nil, fmt.Errorf("no delimiters")
	}
	end := strings.LastIndexByte(p, '/')
	flags := strings.ReplaceAll(p[end+1:], "u", "")
	prefix := ""
	if flags != "" {
		prefix = "(?" + flags + ")"
	}
	// RE2 caps repeat counts at 1000; a longer bound is checked as unbounded.
	body := regexp.MustCompile(`\{(\d+),(\d{4,})\}`).ReplaceAllString(p[1:end], "{$1,}")
	return regexp.Compile(prefix + body)
}

// checkItem holds a new array item against its definition: it needs a
// uuid, and every Required field without a Default must be written.
func checkItem(item *etree.Element, f *mfield) []string {
	var errs []string
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(item.SelectAttrValue("uuid", "")) {
		errs = append(errs, fmt.Sprintf("new %s has no uuid attribute (ArrayField items are keyed by uuid, %s)", f.name, f.file))
	}
	for name, ch := range f.children {
		if ch.leaf() && ch.prop("Required") == "Y" && ch.def.SelectElement("Default") == nil &&
			ch.typ != "LegacyLinkField" && ch.def.SelectAttrValue("volatile", "") != "true" {
			if e := item.SelectElement(name); e == nil || strings.TrimSpace(e.Text()) == "" {
				errs = append(errs, fmt.Sprintf("new %s lacks %s, Required without a Default in %s", f.name, name, f.file))
			}
		}
	}
	return errs
}

// written lists the elements of after that are new or whose text differs
// from before, keyed by path; array items by their uuid.
func written(before, after *etree.Element) []*etree.Element {
	old := map[string]string{}
	var walk func(e *etree.Element, path string, rec func(string, *etree.Element))
	walk = func(e *etree.Element, path string, rec func(string, *etree.Element)) {
		count := map[string]int{}
		for _, ch := range e.ChildElements() {
			count[ch.Tag]++
			key := path + "/" + ch.Tag
			if id := ch.SelectAttrValue("uuid", ""); id != "" {
				key += "[" + id + "]"
			} else {
				key += "[" + strconv.Itoa(count[ch.Tag]) + "]"
			}
			rec(key, ch)
			walk(ch, key, rec)
		}
	}
	walk(before, "", func(k string, e *etree.Element) { old[k] = strings.TrimSpace(leafText(e)) })
	var out []*etree.Element
	walk(after, "", func(k string, e *etree.Element) {
		prev, ok := old[k]
		if !ok || prev != strings.TrimSpace(leafText(e)) {
			out = append(out, e)
		}
	})
	return out
}

func leafText(e *etree.Element) string {
	if len(e.ChildElements()) > 0 {
		return "\x00container"
	}
	return e.Text()
}

// conformance checks everything fwab wrote below <OPNsense> against the
// version's models and returns the problems found.
func (m *opnModels) conformance(t testing.TB, before, after *Config) []string {
	t.Helper()
	var errs []string
	changed := written(before.root(), after.root())
	root := after.root()
	for _, e := range changed {
		if top := topChild(e); top == nil || top.Tag != "OPNsense" {
			continue
		}
		_, f, err := m.resolve(e)
		switch {
		case err != nil:
			// Report the topmost element the model lacks, not each below it.
			if _, _, perr := m.resolve(e.Parent()); perr == nil || e.Parent().Tag == "OPNsense" {
				errs = append(errs, err.Error())
			}
		case f == nil:
		case f.array:
			for _, msg := range checkItem(e, f) {
				errs = append(errs, elementPath(e)+": "+msg)
			}
		case f.leaf():
			if err := m.checkField(t, root, f, strings.TrimSpace(e.Text())); err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", elementPath(e), err))
			}
		}
	}
	slices.Sort(errs)
	return slices.Compact(errs)
}

func topChild(e *etree.Element) *etree.Element {
	for x := e; x != nil && x.Parent() != nil; x = x.Parent() {
		if p := x.Parent(); p.Parent() != nil && p.Parent().Parent() == nil {
			return x
		}
	}
	return nil
}

func elementPath(e *etree.Element) string {
	var tags []string
	for x := e; x != nil && x.Parent() != nil && x.Parent().Parent() != nil; x = x.Parent() {
		tags = append([]string{x.Tag}, tags...)
	}
	return strings.Join(tags, "/")
}

// serviceEnabled resolves a service controller's $internalServiceEnabled
// ("general.enabled") in its model, following a LegacyLinkField to the
// legacy element it reads, and returns that element's text.
func (m *opnModels) serviceEnabled(t testing.TB, c *Config, controller, modelClass string) (string, string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(m.dir, "src/opnsense/mvc/app/controllers", controller))
	if err != nil {
		t.Fatalf("OPNsense %s: %v", m.version, err)
	}
	mt := regexp.MustCompile(`internalServiceEnabled = '([^']+)'`).FindSubmatch(src)
	if mt == nil {
		t.Fatalf("OPNsense %s %s: no $internalServiceEnabled", m.version, controller)
	}
	mm := m.byClass(modelClass)
	if mm == nil {
		t.Fatalf("OPNsense %s: no model %s", m.version, modelClass)
	}
	f := mm.items
	for _, step := range strings.Split(string(mt[1]), ".") {
		f = f.children[step]
		if f == nil {
			t.Fatalf("OPNsense %s: %s has no %s", m.version, mm.file, mt[1])
		}
	}
	path := mm.mount + "/" + strings.ReplaceAll(string(mt[1]), ".", "/")
	if f.typ == "LegacyLinkField" {
		path = strings.ReplaceAll(f.prop("Source"), ".", "/")
	}
	e := c.root().FindElement(path)
	if e == nil {
		return path, ""
	}
	return path, strings.TrimSpace(e.Text())
}
