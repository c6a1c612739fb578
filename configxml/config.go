// Package configxml reads, changes, lints and compares pfSense and OPNsense
// config.xml files.
//
// A Config keeps the bytes it was loaded from: writing an unchanged Config
// gives back the same bytes, and a change alters only the changed elements'
// lines plus <revision>. Load checks the whole document but builds a
// section (a child of the root: <system>, <filter>, <rrd>) only when
// something reads it, and Save copies unread sections straight from the
// input, so setting an offload on a config with 20,000 rules and years of
// RRD data builds neither; diff, lint and the rules count go through a
// large unread section one child at a time. Changes are made through knobs (see Knobs), typed
// per flavor and version, so that a value the target cannot take is refused
// before anything is written.
//
// The package does no I/O beyond the io.Reader and io.Writer it is handed.
package configxml

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/beevik/etree"
)

// Config is one loaded config.xml. It is not safe for concurrent use, not
// even to read: reading a section builds it.
type Config struct {
	doc     *etree.Document
	src     *source
	flavor  Flavor
	product Product
	tunnels map[string]TunnelSpec
	pending map[string]string // the assignments SetAll is checking, by knob
	// before, on a copy SetAll checks knobs again on (checkOnCopy), is
	// the config the set started from: a check that allows the box's own
	// state reads it there, not the state the set made.
	before *Config
	// touched, while not nil, records the sections code asks for ("*"
	// for the whole root): what a knob's value is read from.
	touched map[string]bool

	// Now and User fill <revision> on every change. Nil Now means
	// time.Now; empty User means "fwab".
	Now  func() time.Time
	User string
}

// Product is the firewall software version a config belongs to.
type Product struct {
	Version  string // e.g. "2.7.2", "26.1"
	Inferred bool   // guessed from the config's <version>, not reported by the firewall
}

// Load reads a config.xml. It refuses anything that is not a single
// well-formed pfSense or OPNsense document, with the line and column of the
// problem where the parser knows them.
func Load(r io.Reader) (*Config, error) {
	var buf bytes.Buffer
	if st, ok := r.(interface{ Stat() (fs.FileInfo, error) }); ok {
		if fi, err := st.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() <= maxConfigSize {
			buf.Grow(int(fi.Size()) + bytes.MinRead) // one allocation for a file of known size
		}
	}
	_, err := buf.ReadFrom(io.LimitReader(r, maxConfigSize+1))
	data := buf.Bytes()
	if err != nil {
		return nil, fmt.Errorf("read config.xml: %w", err)
	}
	return LoadBytes(data)
}

// LoadBytes is Load for a config already in memory. The Config keeps data:
// the caller must not modify it afterwards.
func LoadBytes(data []byte) (*Config, error) {
	return LoadContext(context.Background(), data)
}

// LoadContext is LoadBytes that stops, returning ctx's error, when ctx is
// done: reading a config of hundreds of megabytes takes seconds.
func LoadContext(ctx context.Context, data []byte) (*Config, error) {
	doc, src, err := parse(ctx, data)
	if err != nil {
		return nil, err
	}
	c := &Config{doc: doc, src: src}
	root := doc.Root()
	switch root.Tag {
	case "pfsense":
		c.flavor = PfSense
	case "opnsense":
		c.flavor = OPNsense
	default:
		return nil, &ParseError{Msg: fmt.Sprintf("root element is <%s>, not <pfsense> or <opnsense>: not a firewall config", root.Tag)}
	}
	c.product = Product{Version: inferProduct(c.flavor, c.ConfigVersion()), Inferred: true}
	if c.flavor == OPNsense {
		c.product.Version = c.inferOPNsense()
	}
	return c, nil
}

// WriteTo writes the config. An unchanged Config writes the bytes it was
// loaded from.
func (c *Config) WriteTo(w io.Writer) (int64, error) { return c.write(w) }

// Bytes returns the serialized config.
func (c *Config) Bytes() []byte {
	var b bytes.Buffer
	b.Grow(len(c.src.data) + 4096)
	c.write(&b) // writes to a bytes.Buffer do not fail
	return b.Bytes()
}

// Flavor is the product the config belongs to.
func (c *Config) Flavor() Flavor { return c.flavor }

// ConfigVersion is the config schema version, <version> under the root.
func (c *Config) ConfigVersion() string {
	if v := c.section("version"); v != nil {
		return strings.TrimSpace(v.Text())
	}
	return ""
}

// Product returns the product version: the one SetProduct was given, or one
// inferred from the config version.
func (c *Config) Product() Product { return c.product }

// SetProduct records the product version the firewall reports (e.g.
// "2.7.2-RELEASE" or "OPNsense 26.1.2"). Knob validation follows it.
func (c *Config) SetProduct(version string) error {
	v := normalizeProduct(version)
	pv, err := parseVersion(v)
	if err != nil {
		return fmt.Errorf("product version %q: %w", version, err)
	}
	if err := CheckVersion(c.flavor, v); err != nil {
		return fmt.Errorf("product version: %w", err)
	}
	if err := c.layoutAllows(pv); err != nil {
		return fmt.Errorf("product version %s: %w", v, err)
	}
	c.product = Product{Version: v}
	return nil
}

// Root gives read access to the document. Changes must go through Set:
// edits made directly are written out, but skip validation and <revision>.
func (c *Config) Root() *etree.Element { return c.root() }

// root is the root element with every section read: what code that walks
// the document as a whole needs.
func (c *Config) root() *etree.Element {
	c.touch("*")
	r := c.doc.Root()
	c.src.readAll(r)
	return r
}

// top is the root element as it is, its sections perhaps unread: for
// code that works on the root's own children (<revision>, where a new
// section goes), not on what is inside them.
func (c *Config) top() *etree.Element { return c.doc.Root() }

func (c *Config) touch(tag string) {
	if c.touched != nil {
		c.touched[tag] = true
	}
}

// section is the root's first child element named tag, read, or nil: the
// way to one part of a config that leaves the others unread.
func (c *Config) section(tag string) *etree.Element {
	c.touch(tag)
	e := c.doc.Root().SelectElement(tag)
	if e != nil {
		c.src.read(e)
	}
	return e
}

// each calls fn for each element tag below each section named section,
// in document order, until fn returns false; it reads no section that is
// unread (source.each): fn reads what it is given, and changes nothing.
func (c *Config) each(section, tag string, fn func(*etree.Element) bool) {
	c.touch(section)
	for _, sec := range c.doc.Root().SelectElements(section) {
		if !c.src.each(sec, tag, fn) {
			return
		}
	}
}

// indexOf is children's index of the first section named section, from
// the input if it is unread, else from its tree; nil when there is none.
func (c *Config) indexOf(section string) []child {
	c.touch(section)
	sec := c.top().SelectElement(section)
	if sec == nil {
		return nil
	}
	if _, unread := c.src.unread[sec]; unread {
		return c.src.children(sec)
	}
	var ix []child
	for _, e := range sec.ChildElements() {
		ix = append(ix, childOf(e, span{}))
	}
	return ix
}

// has reports whether a section named section has an element tag, going
// no further into it than the first (each).
func (c *Config) has(section, tag string) bool {
	found := false
	c.each(section, tag, func(*etree.Element) bool {
		found = true
		return false
	})
	return found
}

// find is Root().FindElement(path) for a relative path whose first step
// is a plain tag, reading only the sections that tag names.
func (c *Config) find(path string) *etree.Element {
	if found := c.findAll(path, true); len(found) > 0 {
		return found[0]
	}
	return nil
}

// findAll is Root().FindElements(path) for a relative path whose first
// step is a plain tag, reading only the sections that tag names; first
// stops at the first match.
func (c *Config) findAll(path string, first bool) []*etree.Element {
	tag, rest, nested := strings.Cut(path, "/")
	if strings.ContainsAny(tag, "[]@*.:") || tag == "" {
		if first {
			if e := c.root().FindElement(path); e != nil {
				return []*etree.Element{e}
			}
			return nil
		}
		return c.root().FindElements(path)
	}
	c.touch(tag)
	var out []*etree.Element
	for _, sec := range c.doc.Root().SelectElements(tag) {
		c.src.read(sec) // what is found is read, the section itself too
		switch {
		case !nested:
			out = append(out, sec)
		case first:
			if e := sec.FindElement(rest); e != nil {
				out = append(out, e)
			}
		default:
			out = append(out, sec.FindElements(rest)...)
		}
		if first && len(out) > 0 {
			return out
		}
	}
	return out
}

// Interface is one assigned interface, <interfaces><KEY>.
type Interface struct {
	Key     string // lan, wan, opt1
	Device  string // <if>: igb1, vtnet0
	Descr   string
	IPAddr  string
	Subnet  string
	Enabled bool
}

// Interfaces lists the assigned interfaces in document order.
func (c *Config) Interfaces() []Interface {
	ifs := c.section("interfaces")
	if ifs == nil {
		return nil
	}
	var out []Interface
	for _, e := range ifs.ChildElements() {
		out = append(out, Interface{
			Key:     e.Tag,
			Device:  childText(e, "if"),
			Descr:   childText(e, "descr"),
			IPAddr:  childText(e, "ipaddr"),
			Subnet:  childText(e, "subnet"),
			Enabled: e.SelectElement("enable") != nil,
		})
	}
	return out
}

func (c *Config) interfaceKeys() []string {
	var keys []string
	for _, i := range c.Interfaces() {
		keys = append(keys, i.Key)
	}
	return keys
}

func (c *Config) hasInterface(key string) bool {
	for _, i := range c.Interfaces() {
		if i.Key == key {
			return true
		}
	}
	return false
}

// childText is the trimmed text of the element at path below e, or "".
func childText(e *etree.Element, path string) string {
	var c *etree.Element
	if strings.Contains(path, "/") {
		c = e.FindElement(path)
	} else {
		c = e.SelectElement(path)
	}
	if c != nil {
		return strings.TrimSpace(c.Text())
	}
	return ""
}
