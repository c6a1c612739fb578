package configxml

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
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

// elemSpan records where an element's tags were in the source.
type elemSpan struct {
	start span // "<tag attr='v'>" or "<tag/>"
	end   span // "</tag>"; empty when the element was self-closing
	attrs []etree.Attr
}

func (s elemSpan) selfClosing() bool { return s.end.off == s.end.end }

// source keeps the bytes a Config was loaded from and where every token came
// from, so that Save writes untouched tokens back byte for byte and only what
// changed is serialized anew.
type source struct {
	data   []byte
	elems  map[*etree.Element]elemSpan
	chars  map[*etree.CharData]span
	others map[etree.Token]span // comments, processing instructions
	style  style
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

// parse reads data into an etree document and records every token's source span.
func parse(data []byte) (*etree.Document, *source, error) {
	if len(data) > maxConfigSize {
		return nil, nil, &ParseError{Msg: fmt.Sprintf("%d bytes is larger than the %d-byte limit; is this really a config.xml?", len(data), maxConfigSize)}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil, &ParseError{Msg: "the file is empty"}
	}
	src := &source{
		data:   data,
		elems:  make(map[*etree.Element]elemSpan, len(data)/64),
		chars:  make(map[*etree.CharData]span, len(data)/32),
		others: make(map[etree.Token]span),
	}
	doc := etree.NewDocument()
	dec := xml.NewDecoder(bytes.NewReader(data))
	dec.Strict = true
	dec.CharsetReader = func(charset string, input io.Reader) (io.Reader, error) {
		switch strings.ToLower(charset) {
		case "utf-8", "utf8", "us-ascii", "ascii":
			return input, nil
		}
		return nil, fmt.Errorf("encoding %q is not supported: pfSense and OPNsense write UTF-8", charset)
	}

	type open struct {
		el        *etree.Element
		line, col int
	}
	stack := []open{}
	top := &doc.Element
	roots := 0
	var empties, selfClosed int

	fail := func(msg string, args ...any) error {
		line, col := dec.InputPos()
		return &ParseError{Line: line, Col: col, Msg: fmt.Sprintf(msg, args...)}
	}

	for {
		off := int(dec.InputOffset())
		line, col := dec.InputPos()
		tok, err := dec.RawToken()
		if err == io.EOF {
			break
		}
		if err != nil {
			var se *xml.SyntaxError
			if errors.As(err, &se) {
				l, c := dec.InputPos()
				msg := se.Msg
				if msg == "unexpected EOF" {
					msg = "unexpected end of file: the config is truncated"
				}
				return nil, nil, &ParseError{Line: l, Col: c, Msg: msg}
			}
			return nil, nil, fail("%v", err)
		}
		end := int(dec.InputOffset())
		sp := span{off, end}

		switch t := tok.(type) {
		case xml.StartElement:
			if len(stack) == 0 {
				roots++
				if roots > 1 {
					return nil, nil, &ParseError{Line: line, Col: col, Msg: fmt.Sprintf("a second root element <%s>: a config.xml has exactly one", t.Name.Local)}
				}
			}
			if len(stack) >= maxDepth {
				return nil, nil, &ParseError{Line: line, Col: col, Msg: fmt.Sprintf("elements nested more than %d deep: not a firewall config", maxDepth)}
			}
			name := qualified(t.Name)
			if raw := data[off:end]; len(raw) < len(name)+2 || string(raw[1:1+len(name)]) != name || !isNameEnd(raw[1+len(name)]) {
				return nil, nil, &ParseError{Line: line, Col: col, Msg: fmt.Sprintf("element name %q is not a plain XML name", string(raw[1:min(len(raw), 40)]))}
			}
			el := top.CreateElement(name)
			if el.FullTag() != name {
				return nil, nil, &ParseError{Line: line, Col: col, Msg: fmt.Sprintf("element name %q is not a plain XML name", name)}
			}
			var attrs []etree.Attr
			for _, a := range t.Attr {
				if an := qualified(a.Name); el.CreateAttr(an, a.Value).FullKey() != an {
					return nil, nil, &ParseError{Line: line, Col: col, Msg: fmt.Sprintf("attribute name %q is not a plain XML name", an)}
				}
			}
			if len(el.Attr) > 0 {
				attrs = append([]etree.Attr(nil), el.Attr...)
			}
			src.elems[el] = elemSpan{start: sp, attrs: attrs}
			stack = append(stack, open{el, line, col})
			top = el
		case xml.EndElement:
			if len(stack) == 0 {
				return nil, nil, &ParseError{Line: line, Col: col, Msg: fmt.Sprintf("</%s> closes nothing", qualified(t.Name))}
			}
			o := stack[len(stack)-1]
			if name := qualified(t.Name); name != o.el.FullTag() {
				return nil, nil, &ParseError{Line: line, Col: col, Msg: fmt.Sprintf("</%s> does not close <%s> opened at %d:%d", name, o.el.FullTag(), o.line, o.col)}
			}
			es := src.elems[o.el]
			es.end = sp
			src.elems[o.el] = es
			if len(o.el.Child) == 0 {
				empties++
				if es.selfClosing() {
					selfClosed++
				}
			}
			stack = stack[:len(stack)-1]
			top = o.el.Parent()
			if len(stack) == 0 {
				top = &doc.Element
			}
		case xml.CharData:
			raw := data[off:end]
			if len(stack) == 0 {
				if len(bytes.TrimSpace(bytes.TrimPrefix(raw, []byte("\ufeff")))) != 0 || (off != 0 && bytes.Contains(raw, []byte("\ufeff"))) {
					return nil, nil, &ParseError{Line: line, Col: col, Msg: "text outside the root element"}
				}
			}
			var cd *etree.CharData
			if bytes.HasPrefix(raw, []byte("<![CDATA[")) {
				cd = top.CreateCData(string(t))
			} else {
				cd = top.CreateText(textOf(raw, t))
				if isSpace(raw) {
					cd.SetData(cd.Data) // sets etree's whitespace flag
				}
			}
			src.chars[cd] = sp
		case xml.Comment:
			src.others[top.CreateComment(string(t))] = sp
		case xml.ProcInst:
			if t.Target == "xml" && off != 0 {
				return nil, nil, &ParseError{Line: line, Col: col, Msg: "the XML declaration must be the very first thing in the file"}
			}
			src.others[top.CreateProcInst(t.Target, string(t.Inst))] = sp
		case xml.Directive:
			return nil, nil, &ParseError{Line: line, Col: col, Msg: "a <!DOCTYPE> or other directive: pfSense and OPNsense never write one, and fwab does not expand entities"}
		}
	}
	if len(stack) > 0 {
		o := stack[len(stack)-1]
		l, c := dec.InputPos()
		return nil, nil, &ParseError{Line: l, Col: c, Msg: fmt.Sprintf("unexpected end of file: <%s> opened at %d:%d is never closed (truncated config?)", o.el.FullTag(), o.line, o.col)}
	}
	if roots == 0 {
		return nil, nil, &ParseError{Msg: "no root element"}
	}
	src.style = detectStyle(doc, src, empties, selfClosed)
	return doc, src, nil
}

// textOf returns the decoded text, sharing the source's memory when the raw
// bytes are the text itself (no entities): the common case, and the one that
// matters for megabytes of RRD data. data is never modified after Load.
func textOf(raw []byte, decoded []byte) string {
	if bytes.Equal(raw, decoded) && len(raw) > 0 {
		return unsafe.String(&raw[0], len(raw))
	}
	return string(decoded)
}

func qualified(n xml.Name) string {
	if n.Space != "" {
		return n.Space + ":" + n.Local
	}
	return n.Local
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
