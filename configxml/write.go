package configxml

import (
	"bufio"
	"bytes"
	"io"
	"strings"

	"github.com/beevik/etree"
)

// writer serializes a document, copying every token that is unchanged since
// Load straight from the source bytes. Only tokens that were added or edited
// are written anew, in the document's own style.
type writer struct {
	w   *bufio.Writer
	src *source
}

func (c *Config) write(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	wr := &writer{w: bufio.NewWriterSize(cw, 256<<10), src: c.src}
	for _, t := range c.doc.Child {
		wr.token(t)
	}
	if err := wr.w.Flush(); err != nil {
		return cw.n, err
	}
	return cw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (wr *writer) raw(s span) { wr.w.Write(wr.src.data[s.off:s.end]) }

func (wr *writer) token(t etree.Token) {
	switch t := t.(type) {
	case *etree.Element:
		wr.element(t)
	case *etree.CharData:
		if !t.IsCData() && wr.src.shares(t.Data) {
			wr.w.WriteString(t.Data) // plain text from the source: no <, & or ]]> in it
			return
		}
		switch ts, ok := wr.src.texts[t]; {
		case ok && ts.text == t.Data && !t.IsCData() == !bytes.HasPrefix(wr.src.data[ts.off:ts.end], []byte("<![CDATA[")):
			wr.raw(ts.span) // text with entities or CRs, unchanged
		case t.IsCData():
			wr.cdata(t.Data)
		default:
			wr.w.WriteString(escapeText(t.Data))
		}
	case *etree.Comment:
		if sp, ok := wr.src.others[t]; ok && string(wr.src.data[sp.off:sp.end]) == "<!--"+t.Data+"-->" {
			wr.raw(sp)
			return
		}
		wr.w.WriteString("<!--" + strings.ReplaceAll(t.Data, "--", "- -") + "-->")
	case *etree.ProcInst:
		if sp, ok := wr.src.others[t]; ok {
			wr.raw(sp)
			return
		}
		wr.w.WriteString("<?" + t.Target)
		if t.Inst != "" {
			wr.w.WriteString(" " + t.Inst)
		}
		wr.w.WriteString("?>")
	case *etree.Directive:
		// Load refuses directives; nothing fwab writes creates one.
	}
}

func (wr *writer) element(e *etree.Element) {
	sp, irregular := wr.src.elems[e]
	if irregular && !wr.startUnchanged(e, sp) {
		irregular = false // renamed or attributes edited: write it anew
	}
	switch {
	case irregular && sp.selfClosing() && len(e.Child) == 0:
		wr.raw(sp.start)
		return
	case irregular && !sp.selfClosing():
		wr.raw(sp.start)
	default:
		// A regular element (<tag>…</tag>) comes out as it went in; an
		// element fwab added takes the document's style when empty.
		wr.startTag(e)
		if len(e.Child) == 0 && wr.src.fresh[e] && wr.src.style.selfCloseEmpty {
			wr.w.WriteString("/>")
			return
		}
		wr.w.WriteByte('>')
	}
	if inner, unread := wr.src.unread[e]; unread {
		wr.raw(inner) // a section nothing has read is as it was
	} else {
		for _, c := range e.Child {
			wr.token(c)
		}
	}
	if irregular && !sp.selfClosing() {
		wr.raw(sp.end)
		return
	}
	wr.w.WriteString("</")
	wr.w.WriteString(e.FullTag())
	wr.w.WriteByte('>')
}

// startUnchanged reports whether the element's name and attributes are still
// those of its source start tag.
func (wr *writer) startUnchanged(e *etree.Element, sp elemSpan) bool {
	raw := wr.src.data[sp.start.off:sp.start.end]
	name := e.FullTag()
	if len(raw) < len(name)+2 || string(raw[1:1+len(name)]) != name {
		return false
	}
	if !isNameEnd(raw[1+len(name)]) {
		return false
	}
	if len(e.Attr) != len(sp.attrs) {
		return false
	}
	for i := range e.Attr {
		if e.Attr[i] != sp.attrs[i] {
			return false
		}
	}
	return true
}

func (wr *writer) startTag(e *etree.Element) {
	wr.w.WriteByte('<')
	wr.w.WriteString(e.FullTag())
	for _, a := range e.Attr {
		wr.w.WriteByte(' ')
		wr.w.WriteString(a.FullKey())
		wr.w.WriteString(`="`)
		wr.w.WriteString(escapeAttr(a.Value))
		wr.w.WriteByte('"')
	}
}

func (wr *writer) cdata(s string) {
	wr.w.WriteString("<![CDATA[")
	wr.w.WriteString(strings.ReplaceAll(s, "]]>", "]]]]><![CDATA[>"))
	wr.w.WriteString("]]>")
}

var (
	textEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "\r", "&#xD;")
	attrEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "\n", "&#xA;", "\r", "&#xD;", "\t", "&#x9;")
)

func escapeText(s string) string { return textEscaper.Replace(s) }
func escapeAttr(s string) string { return attrEscaper.Replace(s) }

// normalizeNewlines does what an XML parser does to line ends: CRLF and a
// lone CR become LF.
func normalizeNewlines(s string) string {
	if !strings.Contains(s, "\r") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
}
