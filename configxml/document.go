package configxml

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unsafe"

	"github.com/beevik/etree"
)

// Limits on what Load accepts. A real config.xml is a few megabytes (tens
// with RRD data) and a dozen levels deep.
const (
	maxConfigSize = 1 << 30
	maxDepth      = 256
)

// span is a byte range of the source document.
type span struct{ off, end int }

// elemSpan records where an irregular element's tags were in the source.
type elemSpan struct {
	start span // "<tag attr='v'>" or "<tag/>"
	end   span // "</tag >"; empty when the element was self-closing
	attrs []etree.Attr
}

func (s elemSpan) selfClosing() bool { return s.end.off == s.end.end }

// textSpan records a text node whose source differs from its text: one with
// entities or carriage returns.
type textSpan struct {
	span
	text string
}

// source keeps the bytes a Config was loaded from, so that Save copies
// untouched parts back verbatim and serializes only what changed.
//
// Most of a config needs no bookkeeping: plain text shares the source's
// memory (so Save can tell it is untouched), and an element written as
// <tag>…</tag> comes out the same when written anew. Only the rest is
// recorded: elements with attributes, self-closing or with space inside
// their tags; text with entities; comments and processing instructions.
type source struct {
	data []byte
	// unread holds the sections (the root's child elements) whose
	// content has not been built yet: the span between the start and the
	// end tag. Load checks the whole document but builds a section only
	// when something reads it (Config.section), so a command that sets
	// one knob never builds the 20,000 rules of <filter>, and Save copies
	// an unread section's bytes straight from the input.
	unread map[*etree.Element]span
	// index holds children's index of unread sections.
	index  map[*etree.Element][]child
	elems  map[*etree.Element]elemSpan
	texts  map[*etree.CharData]textSpan
	others map[etree.Token]span // comments, processing instructions
	fresh  map[*etree.Element]bool
	style  style
}

// shares reports whether s is a view of the source's bytes: text that has
// not been replaced since Load.
func (src *source) shares(s string) bool {
	if len(s) == 0 || len(src.data) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	base := uintptr(unsafe.Pointer(&src.data[0]))
	return p >= base && p+uintptr(len(s)) <= base+uintptr(len(src.data))
}

// style is how the document writes things fwab adds to it.
type style struct {
	indent         string // one level of indentation
	newline        string
	selfCloseEmpty bool // <x/> rather than <x></x>
}

// ParseError is a config.xml that is not well-formed, or not a firewall
// config. Line and Col are 1-based; zero when unknown.
type ParseError struct {
	Line, Col int
	Msg       string
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("config.xml:%d:%d: %s", e.Line, e.Col, e.Msg)
	}
	return "config.xml: " + e.Msg
}

// parse reads data into an etree document and records what Save needs to
// reproduce it. The sections are checked but left unread (source.unread):
// source.read builds one when it is needed.
func parse(ctx context.Context, data []byte) (*etree.Document, *source, error) {
	if err := checkSize(data); err != nil {
		return nil, nil, err
	}
	p := newParser(data)
	p.lazy = true
	if err := p.run(ctx); err != nil {
		return nil, nil, err
	}
	if err := p.finish(); err != nil {
		return nil, nil, err
	}
	return p.doc, p.src, nil
}

// run feeds the scanner's tokens to the parser until the end of its data.
func (p *parser) run(ctx context.Context) error {
	for n := 0; ; n++ {
		// A large config takes seconds to read: an interrupt stops it.
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		tok, err := p.sc.next()
		if err != nil {
			var se *scanError
			if errors.As(err, &se) {
				return p.errAt(se.off, "%s", se.msg)
			}
			return err
		}
		if tok.kind == tokEOF {
			return nil
		}
		if err := p.token(&tok); err != nil {
			return err
		}
	}
}

// read builds the content of section el if it is still unread. Load has
// checked it already, so building it cannot fail.
func (src *source) read(el *etree.Element) {
	sp, ok := src.unread[el]
	if !ok {
		return
	}
	delete(src.unread, el)
	p := &parser{
		data:   src.data,
		sc:     &scanner{data: src.data[:sp.end], pos: sp.off},
		src:    src,
		stack:  []*etree.Element{el},
		opened: []int{sp.off},
		top:    el,
	}
	if err := p.run(context.Background()); err != nil {
		panic(fmt.Sprintf("configxml: section <%s> was checked at load and now fails: %v", el.Tag, err))
	}
}

// each calls fn for each child element of section el named tag, in
// document order, until fn returns false. An unread section stays unread:
// each child is built on its own from the input, without the white space
// between its elements, and dropped after fn, so going through 20,000
// filter rules never holds more than one. fn reads the child (trimmed
// texts read the same); a change to it would be lost.
func (src *source) each(el *etree.Element, tag string, fn func(*etree.Element) bool) bool {
	if _, unread := src.unread[el]; !unread {
		for _, e := range el.SelectElements(tag) {
			if !fn(e) {
				return false
			}
		}
		return true
	}
	return src.eachIn(src.unread[el], func(e *etree.Element, _ span) bool {
		return e.Tag != tag || fn(e)
	})
}

// eachIn builds each element directly inside the span sp of the input on
// its own, as each does, and calls fn with it and its span until fn
// returns false.
func (src *source) eachIn(sp span, fn func(*etree.Element, span) bool) bool {
	holder := etree.NewElement("")
	p := &parser{
		data: src.data,
		sc:   &scanner{data: src.data[:sp.end], pos: sp.off},
		// A throwaway source: the children are built to be read
		// (view), the section stays unread.
		src:    &source{data: src.data, others: map[etree.Token]span{}},
		view:   true,
		slab:   &slab{},
		stack:  []*etree.Element{holder},
		opened: []int{sp.off},
		top:    holder,
	}
	more := true
	p.done = func(e *etree.Element, sp span) {
		if more {
			more = fn(e, sp)
		}
		holder.Child = holder.Child[:0]
		clear(p.src.others)
		p.slab.reset()
	}
	for more {
		tok, err := p.sc.next()
		if err != nil {
			panic(fmt.Sprintf("configxml: a section was checked at load and now fails: %v", err))
		}
		if tok.kind == tokEOF {
			break
		}
		if err := p.token(&tok); err != nil {
			panic(fmt.Sprintf("configxml: a section was checked at load and now fails: %v", err))
		}
	}
	return more
}

// child is what an index keeps of one child element of a section: where
// it is in the input, and the leaves that identify it (OPNsense's uuid
// attribute, pfSense's <tracker>) and tell a generated rule (<descr>,
// <interface>), trimmed.
type child struct {
	sp                    span
	tag, uuid             string
	tracker, descr, iface string
}

func childOf(e *etree.Element, sp span) child {
	return child{
		sp: sp, tag: e.Tag, uuid: e.SelectAttrValue("uuid", ""),
		tracker: childText(e, "tracker"), descr: childText(e, "descr"), iface: childText(e, "interface"),
	}
}

// children is the index of the child elements of the unread section el,
// made while Load checks it (indexer) and kept: an unread section does not
// change. Diff, FWAB005 and the rules count read it.
func (src *source) children(el *etree.Element) []child { return src.index[el] }

// bytes is the input at sp.
func (src *source) bytes(sp span) []byte { return src.data[sp.off:sp.end] }

// view builds the element at span sp of the input to be read, as each
// does, to keep.
func (src *source) view(sp span) *etree.Element {
	var out *etree.Element
	src.eachIn(sp, func(e *etree.Element, _ span) bool {
		out = e.Copy()
		return false
	})
	return out
}

// slab holds the elements and texts of the child source.each builds, for
// the next child to reuse: going through a large section makes no
// garbage. Its chunks never move, as the elements point to each other.
type slab struct {
	elems        [][]etree.Element
	texts        [][]etree.CharData
	nelem, ntext int
}

const slabChunk = 256

func (s *slab) reset() { s.nelem, s.ntext = 0, 0 }

// element is a new element named name, its slices kept from last use.
func (s *slab) element(name string) *etree.Element {
	i := s.nelem
	s.nelem++
	if i/slabChunk == len(s.elems) {
		s.elems = append(s.elems, make([]etree.Element, slabChunk))
	}
	el := &s.elems[i/slabChunk][i%slabChunk]
	space, tag := splitName(name)
	*el = etree.Element{Space: space, Tag: tag, Attr: el.Attr[:0], Child: el.Child[:0]}
	return el
}

var cdataProto = etree.NewCData("")

// text is a new text node, a CDATA section if cdata.
func (s *slab) text(data string, cdata bool) *etree.CharData {
	i := s.ntext
	s.ntext++
	if i/slabChunk == len(s.texts) {
		s.texts = append(s.texts, make([]etree.CharData, slabChunk))
	}
	cd := &s.texts[i/slabChunk][i%slabChunk]
	if cdata {
		*cd = *cdataProto
	} else {
		*cd = etree.CharData{}
	}
	cd.Data = data
	return cd
}

// readAll builds every unread section under root.
func (src *source) readAll(root *etree.Element) {
	if len(src.unread) == 0 || root == nil {
		return
	}
	for _, e := range root.ChildElements() {
		src.read(e)
	}
}

// checkSize refuses a document too large or empty to be a config.xml.
func checkSize(data []byte) error {
	if len(data) > maxConfigSize {
		return &ParseError{Msg: fmt.Sprintf("%d bytes is larger than the %d-byte limit; is this really a config.xml?", len(data), maxConfigSize)}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return &ParseError{Msg: "the file is empty"}
	}
	return nil
}

// parser builds the document from the scanner's tokens, one at a time.
type parser struct {
	data   []byte
	sc     *scanner
	doc    *etree.Document
	src    *source
	stack  []*etree.Element // the open elements
	opened []int            // their start offsets
	top    *etree.Element   // where the next token goes: the innermost open element, or the document
	roots  int
	// empties counts the elements with no children, selfClosed those of them
	// written <x/>: detectStyle picks the document's way from them.
	empties, selfClosed int

	// lazy: check a section's content but do not build it (parse).
	lazy bool
	// done, when set, is called with each element closed directly below
	// the bottom of the stack, and its span (source.each).
	done func(*etree.Element, span)
	// view: build elements to read, not to write back: no white space
	// between them and no record of their source, taken from slab
	// (source.each).
	view bool
	slab *slab
	// skipped are the open elements inside a section being checked, not
	// built; sectionAt is where that section's content starts, and
	// justOpened whether the last token opened an element.
	skipped    []skippedElem
	sectionAt  int
	justOpened bool
	ix         indexer // the index of the section being checked
}

type skippedElem struct {
	name string
	off  int
}

// newParser starts a document, past a byte order mark (which it keeps as
// text, so Save writes it back).
func newParser(data []byte) *parser {
	p := &parser{
		data: data,
		sc:   &scanner{data: data},
		doc:  etree.NewDocument(),
		src: &source{
			data:   data,
			unread: map[*etree.Element]span{},
			index:  map[*etree.Element][]child{},
			elems:  map[*etree.Element]elemSpan{},
			texts:  map[*etree.CharData]textSpan{},
			others: map[etree.Token]span{},
			fresh:  map[*etree.Element]bool{},
		},
	}
	p.top = &p.doc.Element
	if bytes.HasPrefix(data, []byte("\ufeff")) {
		p.sc.pos = 3
		bom := p.doc.CreateText(string(data[:3]))
		p.src.texts[bom] = textSpan{span{0, 3}, bom.Data}
	}
	return p
}

func (p *parser) errAt(off int, format string, args ...any) error {
	line, col := position(p.data, off)
	return &ParseError{Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

// token adds one token to the document.
func (p *parser) token(tok *scanToken) error {
	if p.lazy && len(p.stack) >= 2 {
		return p.skip(tok)
	}
	switch tok.kind {
	case tokStart:
		return p.start(tok)
	case tokEnd:
		return p.end(tok)
	case tokText:
		return p.text(tok)
	case tokCDATA:
		return p.cdata(tok)
	case tokComment:
		p.src.others[p.top.CreateComment(tok.text)] = span{tok.off, tok.end}
	case tokProcInst:
		return p.procInst(tok)
	}
	return nil
}

// start opens an element (or adds a self-closing one), recording the tag's
// span when writing it anew would not reproduce it.
func (p *parser) start(tok *scanToken) error {
	if len(p.stack) == 0 {
		p.roots++
		if p.roots > 1 {
			return p.errAt(tok.off, "a second root element <%s>: a config.xml has exactly one", tok.name)
		}
	}
	if len(p.stack) >= maxDepth {
		return p.errAt(tok.off, "elements nested more than %d deep: not a firewall config", maxDepth)
	}
	if err := p.checkName(tok); err != nil {
		return err
	}
	var el *etree.Element
	if p.view {
		el = p.slab.element(tok.name)
		p.top.AddChild(el)
	} else {
		el = p.top.CreateElement(tok.name)
	}
	for _, a := range tok.attrs {
		el.CreateAttr(a.name, a.value)
	}
	if tok.selfClosing {
		if !p.view {
			p.src.elems[el] = elemSpan{start: span{tok.off, tok.end}, end: span{tok.end, tok.end}, attrs: el.Attr}
		}
		p.empties++
		p.selfClosed++
		if p.done != nil && len(p.stack) == 1 {
			p.done(el, span{tok.off, tok.end})
		}
		return nil
	}
	if !p.view && (len(el.Attr) > 0 || tok.end-tok.off != len(tok.name)+2) {
		p.src.elems[el] = elemSpan{start: span{tok.off, tok.end}, attrs: slices.Clone(el.Attr)}
	}
	p.stack = append(p.stack, el)
	p.opened = append(p.opened, tok.off)
	p.top = el
	p.sectionAt = tok.end
	return nil
}

// checkName refuses what etree would not keep as written: a name it
// splits into an empty namespace prefix, or an attribute given twice.
func (p *parser) checkName(tok *scanToken) error {
	bad := strings.HasPrefix(tok.name, ":")
	for i, a := range tok.attrs {
		for _, b := range tok.attrs[:i] {
			if attrKey(a.name) == attrKey(b.name) {
				bad = true
			}
		}
	}
	if bad {
		return p.errAt(tok.off, "<%s> is not a plain XML name", tok.name)
	}
	return nil
}

// attrKey is the attribute name as etree keys it: ":x" and "x" are one.
func attrKey(name string) string {
	if space, key, ok := strings.Cut(name, ":"); ok && space == "" {
		return key
	}
	return name
}

// skip checks a token inside a section without building it: what start,
// end, text and procInst would refuse, it refuses too, and it counts the
// empty elements for detectStyle.
func (p *parser) skip(tok *scanToken) error {
	opened := p.justOpened
	p.justOpened = false
	depth := len(p.skipped)
	switch tok.kind {
	case tokStart:
		if len(p.stack)+len(p.skipped) >= maxDepth {
			return p.errAt(tok.off, "elements nested more than %d deep: not a firewall config", maxDepth)
		}
		if err := p.checkName(tok); err != nil {
			return err
		}
		p.ix.start(depth, tok)
		if tok.selfClosing {
			p.empties++
			p.selfClosed++
			return nil
		}
		p.skipped = append(p.skipped, skippedElem{tok.name, tok.off})
		p.justOpened = true
	case tokEnd:
		if len(p.skipped) == 0 {
			// The section itself ends: its content stays unread.
			if tok.off > p.sectionAt {
				p.src.unread[p.top] = span{p.sectionAt, tok.off}
				p.src.index[p.top] = slices.Concat(p.ix.chunks...)
			}
			p.ix = indexer{}
			return p.end(tok)
		}
		open := p.skipped[len(p.skipped)-1]
		if tok.name != open.name {
			line, col := position(p.data, open.off)
			return p.errAt(tok.off, "</%s> does not close <%s> opened at %d:%d", tok.name, open.name, line, col)
		}
		if opened {
			p.empties++
		}
		p.ix.end(depth, tok)
		p.skipped = p.skipped[:len(p.skipped)-1]
	case tokText, tokCDATA:
		p.ix.text(depth, tok.text)
	case tokProcInst:
		if strings.EqualFold(tok.name, "xml") {
			return p.checkDeclaration(tok)
		}
		p.ix.stop(depth)
	}
	return nil
}

// indexer builds the index of a section skip checks (source.children):
// what childOf would read from each child, had it been built. depth is
// how deep a token is in the section: 0 for its children, 1 for theirs.
type indexer struct {
	chunks  [][]child // the children so far, in chunks that never move
	last    *child
	field   *string // the leaf being read: a field of the last child
	leaf    string  // its text so far
	stopped bool    // an element or instruction ended its text, as etree's Text ends
	seen    [3]bool // the leaves of the last child read (SelectElement finds the first)
}

func (ix *indexer) start(depth int, tok *scanToken) {
	_, tag := splitName(tok.name)
	switch {
	case depth == 0:
		c := child{sp: span{tok.off, tok.end}, tag: tag}
		for _, a := range tok.attrs {
			if _, key := splitName(a.name); key == "uuid" {
				c.uuid = a.value
				break
			}
		}
		if n := len(ix.chunks); n == 0 || len(ix.chunks[n-1]) == cap(ix.chunks[n-1]) {
			ix.chunks = append(ix.chunks, make([]child, 0, 1024))
		}
		n := len(ix.chunks) - 1
		ix.chunks[n] = append(ix.chunks[n], c)
		ix.last = &ix.chunks[n][len(ix.chunks[n])-1]
		ix.seen = [3]bool{}
	case depth == 1 && ix.field == nil:
		c := ix.last
		for i, f := range []*string{&c.tracker, &c.descr, &c.iface} {
			if tag == indexLeaves[i] && !ix.seen[i] {
				ix.seen[i] = true
				if !tok.selfClosing {
					ix.field, ix.leaf, ix.stopped = f, "", false
				}
			}
		}
	case depth == 2:
		ix.stop(depth)
	}
}

var indexLeaves = [3]string{"tracker", "descr", "interface"}

func (ix *indexer) text(depth int, s string) {
	if depth == 2 && ix.field != nil && !ix.stopped {
		ix.leaf += s
	}
}

func (ix *indexer) stop(depth int) {
	if depth == 2 {
		ix.stopped = true
	}
}

func (ix *indexer) end(depth int, tok *scanToken) {
	switch depth {
	case 1:
		ix.last.sp.end = tok.end
	case 2:
		if ix.field != nil {
			*ix.field = strings.TrimSpace(ix.leaf)
			ix.field = nil
		}
	}
}

// splitName splits a name as etree does: "a:b" is b in namespace a.
func splitName(name string) (space, tag string) {
	if i := strings.IndexByte(name, ':'); i >= 0 {
		return name[:i], name[i+1:]
	}
	return "", name
}

// end closes the innermost open element, which must be the one named.
func (p *parser) end(tok *scanToken) error {
	if len(p.stack) == 0 {
		return p.errAt(tok.off, "</%s> closes nothing", tok.name)
	}
	el := p.stack[len(p.stack)-1]
	openedAt := p.opened[len(p.opened)-1]
	if tok.name != el.FullTag() {
		line, col := position(p.data, openedAt)
		return p.errAt(tok.off, "</%s> does not close <%s> opened at %d:%d", tok.name, el.FullTag(), line, col)
	}
	es, irregular := p.src.elems[el]
	if !p.view && (irregular || tok.end-tok.off != len(tok.name)+3) {
		if !irregular {
			es.start = span{openedAt, openedAt + len(tok.name) + 2}
		}
		es.end = span{tok.off, tok.end}
		p.src.elems[el] = es
	}
	if len(el.Child) == 0 && p.src.unread[el] == (span{}) {
		p.empties++
	}
	p.stack, p.opened = p.stack[:len(p.stack)-1], p.opened[:len(p.opened)-1]
	if len(p.stack) > 0 {
		p.top = p.stack[len(p.stack)-1]
	} else {
		p.top = &p.doc.Element
	}
	if p.done != nil && len(p.stack) == 1 {
		p.done(el, span{openedAt, tok.end})
	}
	return nil
}

// text adds character data; only white space may stand outside the root.
func (p *parser) text(tok *scanToken) error {
	raw := p.data[tok.off:tok.end]
	if len(p.stack) == 0 && !isSpace(raw) {
		return p.errAt(tok.off, "text outside the root element")
	}
	if p.view {
		// White space between elements is dropped; between texts (and
		// comments), which etree's Text joins, it is kept.
		if !isSpace(raw) || len(p.top.Child) > 0 && !isElement(p.top.Child[len(p.top.Child)-1]) {
			p.top.AddChild(p.slab.text(tok.text, false))
		}
		return nil
	}
	cd := p.top.CreateText(tok.text)
	if isSpace(raw) {
		cd.SetData(cd.Data) // sets etree's whitespace flag
	}
	if !tok.aliased {
		p.src.texts[cd] = textSpan{span{tok.off, tok.end}, tok.text}
	}
	return nil
}

func isElement(t etree.Token) bool {
	_, ok := t.(*etree.Element)
	return ok
}

// cdata adds a CDATA section inside the root.
func (p *parser) cdata(tok *scanToken) error {
	if len(p.stack) == 0 {
		return p.errAt(tok.off, "CDATA outside the root element")
	}
	if p.view {
		p.top.AddChild(p.slab.text(tok.text, true))
		return nil
	}
	cd := p.top.CreateCData(tok.text)
	if bytes.IndexByte(p.data[tok.off:tok.end], '\r') >= 0 {
		// Written anew, a CDATA section comes out as it went in,
		// unless the parser normalized its line ends.
		p.src.texts[cd] = textSpan{span{tok.off, tok.end}, tok.text}
	}
	return nil
}

// procInst adds a processing instruction; the XML declaration must come
// first and declare what pfSense and OPNsense write.
func (p *parser) procInst(tok *scanToken) error {
	if strings.EqualFold(tok.name, "xml") {
		if err := p.checkDeclaration(tok); err != nil {
			return err
		}
	}
	p.src.others[p.top.CreateProcInst(tok.name, tok.text)] = span{tok.off, tok.end}
	return nil
}

func (p *parser) checkDeclaration(tok *scanToken) error {
	if tok.off != p.sc.startOffset() {
		return p.errAt(tok.off, "the XML declaration must be the very first thing in the file")
	}
	if v := declAttr(tok.text, "version"); v != "1.0" {
		return p.errAt(tok.off, "XML version %q: only 1.0 is supported", v)
	}
	if enc := declAttr(tok.text, "encoding"); enc != "" && !slices.Contains([]string{"utf-8", "utf8", "us-ascii", "ascii"}, strings.ToLower(enc)) {
		return p.errAt(tok.off, "encoding %q is not supported: pfSense and OPNsense write UTF-8", enc)
	}
	return nil
}

// finish checks that the document is whole and settles its style.
func (p *parser) finish() error {
	if n := len(p.skipped); n > 0 {
		line, col := position(p.data, p.skipped[n-1].off)
		return p.errAt(len(p.data), "unexpected end of file: <%s> opened at %d:%d is never closed (truncated config?)", p.skipped[n-1].name, line, col)
	}
	if len(p.stack) > 0 {
		line, col := position(p.data, p.opened[len(p.opened)-1])
		return p.errAt(len(p.data), "unexpected end of file: <%s> opened at %d:%d is never closed (truncated config?)", p.stack[len(p.stack)-1].FullTag(), line, col)
	}
	if p.roots == 0 {
		return &ParseError{Msg: "no root element"}
	}
	p.src.style = detectStyle(p.doc, p.src, p.empties, p.selfClosed)
	return nil
}

func (s *scanner) startOffset() int {
	if bytes.HasPrefix(s.data, []byte("\ufeff")) {
		return 3
	}
	return 0
}

var declAttrs = regexp.MustCompile(`(\w+)\s*=\s*(?:"([^"]*)"|'([^']*)')`)

// declAttr returns a pseudo-attribute of the XML declaration.
func declAttr(inst, name string) string {
	for _, m := range declAttrs.FindAllStringSubmatch(inst, -1) {
		if m[1] == name {
			return m[2] + m[3]
		}
	}
	return ""
}

func isNameEnd(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '/' || c == '>'
}

func isSpace(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// detectStyle finds the document's indentation unit, newline and way of
// writing empty elements, so that what fwab adds looks like what was there.
func detectStyle(doc *etree.Document, src *source, empties, selfClosed int) style {
	st := style{indent: "\t", newline: "\n"}
	if bytes.Contains(src.data, []byte("\r\n")) {
		st.newline = "\r\n"
	}
	root := doc.Root()
	if root != nil {
		for _, t := range root.Child {
			if cd, ok := t.(*etree.CharData); ok && cd.IsWhitespace() {
				ws := cd.Data
				if i := strings.LastIndexByte(ws, '\n'); i >= 0 && i+1 < len(ws) {
					st.indent = ws[i+1:]
					break
				}
			}
		}
	}
	switch {
	case empties > 0:
		st.selfCloseEmpty = selfClosed*2 > empties
	case root != nil && root.Tag == "opnsense":
		st.selfCloseEmpty = true
	}
	return st
}
