package configxml

import (
	"bytes"
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
	data   []byte
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
// reproduce it.
func parse(data []byte) (*etree.Document, *source, error) {
	if len(data) > maxConfigSize {
		return nil, nil, &ParseError{Msg: fmt.Sprintf("%d bytes is larger than the %d-byte limit; is this really a config.xml?", len(data), maxConfigSize)}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil, &ParseError{Msg: "the file is empty"}
	}
	src := &source{
		data:   data,
		elems:  map[*etree.Element]elemSpan{},
		texts:  map[*etree.CharData]textSpan{},
		others: map[etree.Token]span{},
		fresh:  map[*etree.Element]bool{},
	}
	errAt := func(off int, format string, args ...any) error {
		line, col := position(data, off)
		return &ParseError{Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
	}
	sc := &scanner{data: data, names: map[string]string{}}
	if bytes.HasPrefix(data, []byte("\ufeff")) {
		sc.pos = 3
	}
	doc := etree.NewDocument()
	if sc.pos > 0 {
		bom := doc.CreateText(string(data[:3]))
		src.texts[bom] = textSpan{span{0, 3}, bom.Data}
	}

	var stack []*etree.Element
	var opened []int // start offsets of the open elements
	top := &doc.Element
	roots := 0
	var empties, selfClosed int
	for {
		tok, err := sc.next()
		if err != nil {
			var se *scanError
			if errors.As(err, &se) {
				return nil, nil, errAt(se.off, "%s", se.msg)
			}
			return nil, nil, err
		}
		if tok.kind == tokEOF {
			break
		}
		switch tok.kind {
		case tokStart:
			if len(stack) == 0 {
				roots++
				if roots > 1 {
					return nil, nil, errAt(tok.off, "a second root element <%s>: a config.xml has exactly one", tok.name)
				}
			}
			if len(stack) >= maxDepth {
				return nil, nil, errAt(tok.off, "elements nested more than %d deep: not a firewall config", maxDepth)
			}
			el := top.CreateElement(tok.name)
			for _, a := range tok.attrs {
				el.CreateAttr(a.name, a.value)
			}
			if el.FullTag() != tok.name || len(el.Attr) != len(tok.attrs) {
				return nil, nil, errAt(tok.off, "<%s> is not a plain XML name", tok.name)
			}
			if tok.selfClosing {
				src.elems[el] = elemSpan{start: span{tok.off, tok.end}, end: span{tok.end, tok.end}, attrs: el.Attr}
				empties++
				selfClosed++
				if len(stack) == 0 {
					top = &doc.Element
				}
				continue
			}
			if len(el.Attr) > 0 || tok.end-tok.off != len(tok.name)+2 {
				src.elems[el] = elemSpan{start: span{tok.off, tok.end}, attrs: slices.Clone(el.Attr)}
			}
			stack = append(stack, el)
			opened = append(opened, tok.off)
			top = el
		case tokEnd:
			if len(stack) == 0 {
				return nil, nil, errAt(tok.off, "</%s> closes nothing", tok.name)
			}
			el := stack[len(stack)-1]
			if tok.name != el.FullTag() {
				line, col := position(data, opened[len(opened)-1])
				return nil, nil, errAt(tok.off, "</%s> does not close <%s> opened at %d:%d", tok.name, el.FullTag(), line, col)
			}
			es, irregular := src.elems[el]
			if irregular || tok.end-tok.off != len(tok.name)+3 {
				if !irregular {
					es.start = span{opened[len(opened)-1], opened[len(opened)-1] + len(tok.name) + 2}
				}
				es.end = span{tok.off, tok.end}
				src.elems[el] = es
			}
			if len(el.Child) == 0 {
				empties++
			}
			stack, opened = stack[:len(stack)-1], opened[:len(opened)-1]
			top = &doc.Element
			if len(stack) > 0 {
				top = stack[len(stack)-1]
			}
		case tokText:
			if len(stack) == 0 && !isSpace(data[tok.off:tok.end]) {
				return nil, nil, errAt(tok.off, "text outside the root element")
			}
			cd := top.CreateText(tok.text)
			if isSpace(data[tok.off:tok.end]) {
				cd.SetData(cd.Data) // sets etree's whitespace flag
			}
			if !tok.aliased {
				src.texts[cd] = textSpan{span{tok.off, tok.end}, tok.text}
			}
		case tokCDATA:
			if len(stack) == 0 {
				return nil, nil, errAt(tok.off, "CDATA outside the root element")
			}
			cd := top.CreateCData(tok.text)
			if bytes.IndexByte(data[tok.off:tok.end], '\r') >= 0 {
				// Written anew, a CDATA section comes out as it went in,
				// unless the parser normalized its line ends.
				src.texts[cd] = textSpan{span{tok.off, tok.end}, tok.text}
			}
		case tokComment:
			src.others[top.CreateComment(tok.text)] = span{tok.off, tok.end}
		case tokProcInst:
			if strings.EqualFold(tok.name, "xml") {
				if tok.off != sc.startOffset() {
					return nil, nil, errAt(tok.off, "the XML declaration must be the very first thing in the file")
				}
				if v := declAttr(tok.text, "version"); v != "1.0" {
					return nil, nil, errAt(tok.off, "XML version %q: only 1.0 is supported", v)
				}
				if enc := declAttr(tok.text, "encoding"); enc != "" && !slices.Contains([]string{"utf-8", "utf8", "us-ascii", "ascii"}, strings.ToLower(enc)) {
					return nil, nil, errAt(tok.off, "encoding %q is not supported: pfSense and OPNsense write UTF-8", enc)
				}
			}
			src.others[top.CreateProcInst(tok.name, tok.text)] = span{tok.off, tok.end}
		}
	}
	if len(stack) > 0 {
		line, col := position(data, opened[len(opened)-1])
		return nil, nil, errAt(len(data), "unexpected end of file: <%s> opened at %d:%d is never closed (truncated config?)", stack[len(stack)-1].FullTag(), line, col)
	}
	if roots == 0 {
		return nil, nil, &ParseError{Msg: "no root element"}
	}
	src.style = detectStyle(doc, src, empties, selfClosed)
	return doc, src, nil
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
