package configxml

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// scanner splits a config.xml into tokens without copying it: names and
// plain text are strings that share the input's memory, and every token
// knows its byte span, which is what lets Save copy untouched parts back
// verbatim. encoding/xml reports offsets too, but copies every token and
// grows a buffer for a 40 MB <rrddata> blob several times over; this is the
// one piece of XML handling fwab writes itself, and FuzzLoad checks it
// against encoding/xml.
//
// It accepts the XML 1.0 that pfSense and OPNsense write: elements,
// attributes, text with the predefined and numeric entities, CDATA,
// comments and processing instructions. A DOCTYPE is refused, so no entity
// is ever expanded.
type scanner struct {
	data []byte
	pos  int
}

type tokenKind uint8

const (
	tokStart tokenKind = iota
	tokEnd
	tokText
	tokCDATA
	tokComment
	tokProcInst
	tokEOF
)

type scanAttr struct{ name, value string }

type scanToken struct {
	kind        tokenKind
	off, end    int
	name        string // element name; PI target
	attrs       []scanAttr
	selfClosing bool
	text        string // decoded text, CDATA body, comment, PI instruction
	aliased     bool   // text shares the input's bytes verbatim
}

type scanError struct {
	off int
	msg string
}

func (e *scanError) Error() string { return e.msg }

func (s *scanner) fail(off int, format string, args ...any) error {
	return &scanError{off, fmt.Sprintf(format, args...)}
}

// position turns a byte offset into a 1-based line and column (in runes).
func position(data []byte, off int) (line, col int) {
	off = min(off, len(data))
	line = 1 + bytes.Count(data[:off], []byte("\n"))
	start := bytes.LastIndexByte(data[:off], '\n') + 1
	return line, 1 + utf8.RuneCount(data[start:off])
}

func (s *scanner) str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func (s *scanner) next() (scanToken, error) {
	d := s.data
	start := s.pos
	if start >= len(d) {
		return scanToken{kind: tokEOF, off: start, end: start}, nil
	}
	if d[start] != '<' {
		i := bytes.IndexByte(d[start:], '<')
		end := len(d)
		if i >= 0 {
			end = start + i
		}
		s.pos = end
		text, aliased, err := s.decodeText(start, end)
		return scanToken{kind: tokText, off: start, end: end, text: text, aliased: aliased}, err
	}
	rest := d[start:]
	switch {
	case bytes.HasPrefix(rest, []byte("<![CDATA[")):
		i := bytes.Index(rest[9:], []byte("]]>"))
		if i < 0 {
			return scanToken{}, s.fail(len(d), "unexpected end of file inside a CDATA section: the config is truncated")
		}
		body := rest[9 : 9+i]
		if err := s.checkChars(start+9, body); err != nil {
			return scanToken{}, err
		}
		s.pos = start + 9 + i + 3
		return scanToken{kind: tokCDATA, off: start, end: s.pos, text: normalizeNewlines(s.str(body))}, nil // a view of the input, like plain text
	case bytes.HasPrefix(rest, []byte("<!--")):
		i := bytes.Index(rest[4:], []byte("-->"))
		if i < 0 {
			return scanToken{}, s.fail(len(d), "unexpected end of file inside a comment: the config is truncated")
		}
		body := rest[4 : 4+i]
		if j := bytes.Index(body, []byte("--")); j >= 0 || bytes.HasSuffix(body, []byte("-")) {
			return scanToken{}, s.fail(start+4+max(j, 0), "-- is not allowed inside a comment")
		}
		if err := s.checkChars(start+4, body); err != nil {
			return scanToken{}, err
		}
		s.pos = start + 4 + i + 3
		return scanToken{kind: tokComment, off: start, end: s.pos, text: string(body)}, nil
	case bytes.HasPrefix(rest, []byte("<!")):
		return scanToken{}, s.fail(start, "a <!DOCTYPE> or other declaration: pfSense and OPNsense never write one, and fwab does not expand entities")
	case bytes.HasPrefix(rest, []byte("<?")):
		return s.procInst(start)
	case bytes.HasPrefix(rest, []byte("</")):
		return s.endTag(start)
	}
	return s.startTag(start)
}

func (s *scanner) procInst(start int) (scanToken, error) {
	d := s.data
	i := bytes.Index(d[start+2:], []byte("?>"))
	if i < 0 {
		return scanToken{}, s.fail(len(d), "unexpected end of file inside <?...?>: the config is truncated")
	}
	body := d[start+2 : start+2+i]
	n := nameLen(body)
	if n == 0 {
		return scanToken{}, s.fail(start+2, "<? must be followed by a name")
	}
	target, inst := string(body[:n]), body[n:]
	if len(inst) > 0 && !isWS(inst[0]) {
		return scanToken{}, s.fail(start+2+n, "expected a space after <?%s", target)
	}
	if err := s.checkChars(start+2+n, inst); err != nil {
		return scanToken{}, err
	}
	s.pos = start + 2 + i + 2
	return scanToken{kind: tokProcInst, off: start, end: s.pos, name: target, text: strings.TrimLeft(string(inst), " \t\r\n")}, nil
}

func (s *scanner) endTag(start int) (scanToken, error) {
	d := s.data
	p := start + 2
	n := nameLen(d[p:])
	if n == 0 {
		return scanToken{}, s.fail(p, "</ must be followed by an element name")
	}
	name := s.str(d[p : p+n])
	p += n
	for p < len(d) && isWS(d[p]) {
		p++
	}
	if p >= len(d) {
		return scanToken{}, s.fail(len(d), "unexpected end of file in </%s>: the config is truncated", name)
	}
	if d[p] != '>' {
		return scanToken{}, s.fail(p, "expected > to end </%s", name)
	}
	s.pos = p + 1
	return scanToken{kind: tokEnd, off: start, end: s.pos, name: name}, nil
}

func (s *scanner) startTag(start int) (scanToken, error) {
	d := s.data
	p := start + 1
	n := nameLen(d[p:])
	if n == 0 {
		return scanToken{}, s.fail(p, "< must be followed by an element name (a literal < in text is written &lt;)")
	}
	tok := scanToken{kind: tokStart, off: start, name: s.str(d[p : p+n])}
	p += n
	for {
		ws := p
		for p < len(d) && isWS(d[p]) {
			p++
		}
		if p >= len(d) {
			return scanToken{}, s.fail(len(d), "unexpected end of file in <%s>: the config is truncated", tok.name)
		}
		switch d[p] {
		case '>':
			s.pos = p + 1
			tok.end = s.pos
			return tok, nil
		case '/':
			if p+1 >= len(d) || d[p+1] != '>' {
				return scanToken{}, s.fail(p, "expected /> to end <%s", tok.name)
			}
			s.pos = p + 2
			tok.end, tok.selfClosing = s.pos, true
			return tok, nil
		}
		if p == ws {
			return scanToken{}, s.fail(p, "expected a space, > or /> in <%s", tok.name)
		}
		an := nameLen(d[p:])
		if an == 0 {
			return scanToken{}, s.fail(p, "expected an attribute name in <%s", tok.name)
		}
		attr := scanAttr{name: s.str(d[p : p+an])}
		p += an
		for p < len(d) && isWS(d[p]) {
			p++
		}
		if p >= len(d) || d[p] != '=' {
			return scanToken{}, s.fail(p, "attribute %s in <%s> has no value", attr.name, tok.name)
		}
		p++
		for p < len(d) && isWS(d[p]) {
			p++
		}
		if p >= len(d) || (d[p] != '"' && d[p] != '\'') {
			return scanToken{}, s.fail(p, "the value of attribute %s must be quoted", attr.name)
		}
		q := d[p]
		i := bytes.IndexByte(d[p+1:], q)
		if i < 0 {
			return scanToken{}, s.fail(len(d), "unexpected end of file in attribute %s: the config is truncated", attr.name)
		}
		vs, ve := p+1, p+1+i
		if j := bytes.IndexByte(d[vs:ve], '<'); j >= 0 {
			return scanToken{}, s.fail(vs+j, "< in the value of attribute %s (write &lt;)", attr.name)
		}
		v, aliased, err := s.decodeText(vs, ve)
		if err != nil {
			return scanToken{}, err
		}
		if aliased {
			v = string(d[vs:ve]) // only text regions are shared with the input
		}
		attr.value = v
		for _, a := range tok.attrs {
			if a.name == attr.name {
				return scanToken{}, s.fail(p, "attribute %s appears twice in <%s>", attr.name, tok.name)
			}
		}
		tok.attrs = append(tok.attrs, attr)
		p = ve + 1
	}
}

// decodeText checks and decodes the text between two offsets. Text without
// entities or carriage returns is returned as a view of the input.
func (s *scanner) decodeText(start, end int) (string, bool, error) {
	b := s.data[start:end]
	if err := s.checkChars(start, b); err != nil {
		return "", false, err
	}
	if i := bytes.Index(b, []byte("]]>")); i >= 0 {
		return "", false, s.fail(start+i, "]]> is not allowed in text")
	}
	if bytes.IndexByte(b, '&') < 0 && bytes.IndexByte(b, '\r') < 0 {
		return s.str(b), true, nil
	}
	var out strings.Builder
	out.Grow(len(b))
	for i := 0; i < len(b); {
		c := b[i]
		switch c {
		case '\r':
			out.WriteByte('\n')
			i++
			if i < len(b) && b[i] == '\n' {
				i++
			}
			continue
		case '&':
			j := bytes.IndexByte(b[i:], ';')
			if j < 0 || j > 12 {
				return "", false, s.fail(start+i, "& must start an entity such as &amp; (write a literal & as &amp;)")
			}
			r, err := entity(string(b[i+1 : i+j]))
			if err != nil {
				return "", false, s.fail(start+i, "%v", err)
			}
			out.WriteRune(r)
			i += j + 1
			continue
		}
		out.WriteByte(c)
		i++
	}
	return out.String(), false, nil
}

func entity(name string) (rune, error) {
	switch name {
	case "lt":
		return '<', nil
	case "gt":
		return '>', nil
	case "amp":
		return '&', nil
	case "quot":
		return '"', nil
	case "apos":
		return '\'', nil
	}
	if num, ok := strings.CutPrefix(name, "#"); ok {
		base := 10
		if hex, ok := strings.CutPrefix(num, "x"); ok {
			num, base = hex, 16
		}
		n, err := strconv.ParseUint(num, base, 32)
		if err == nil && num != "" && num[0] != '+' && isXMLChar(rune(n)) {
			return rune(n), nil
		}
	}
	return 0, fmt.Errorf("invalid character entity &%s;", name)
}

// checkChars enforces valid UTF-8 and XML 1.0's character range.
func (s *scanner) checkChars(off int, b []byte) error {
	for i := 0; i < len(b); {
		// Eight plain ASCII bytes (none below 0x20, none above 0x7f) at a
		// time: megabytes of base64 RRD data go through here.
		if i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			if (x-0x2020202020202020)&^x&0x8080808080808080 == 0 && x&0x8080808080808080 == 0 {
				i += 8
				continue
			}
		}
		c := b[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
				return s.fail(off+i, "illegal character code %U", rune(c))
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return s.fail(off+i, "invalid UTF-8")
		}
		if !isXMLChar(r) {
			return s.fail(off+i, "illegal character code %U", r)
		}
		i += size
	}
	return nil
}

func isXMLChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// nameLen returns the length of the XML name at the start of b (ASCII, as
// every pfSense and OPNsense element and attribute name is): a letter
// or _ first, then letters, digits, . - _ and at most one inner
// colon (a namespace prefix).
func nameLen(b []byte) int {
	n, colons := 0, 0
	for n < len(b) {
		c := b[n]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case n > 0 && (c >= '0' && c <= '9' || c == '.' || c == '-'):
		case n > 0 && c == ':':
			colons++
		default:
			goto done
		}
		n++
	}
done:
	if n > 0 && (b[n-1] == ':' || colons > 1 || !utf8.Valid(b[:n])) {
		return 0
	}
	return n
}
