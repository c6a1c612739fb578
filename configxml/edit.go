package configxml

import (
	"strings"

	"github.com/beevik/etree"
)

// The edit primitives below keep the document's own layout: a new element is
// indented like its siblings and a removed one takes its leading whitespace
// with it, so the written file differs from the original only in the lines
// that really changed.

// indentOf returns the whitespace that precedes e on its line.
func (c *Config) indentOf(e *etree.Element) string {
	p := e.Parent()
	if p == nil || p == &c.doc.Element {
		return ""
	}
	i := e.Index()
	if i > 0 {
		if cd, ok := p.Child[i-1].(*etree.CharData); ok && cd.IsWhitespace() {
			ws := cd.Data
			if j := strings.LastIndexByte(ws, '\n'); j >= 0 {
				return ws[j+1:]
			}
		}
	}
	return strings.Repeat(c.src.style.indent, depth(e)-1)
}

func depth(e *etree.Element) int {
	d := 0
	for p := e.Parent(); p != nil; p = p.Parent() {
		d++
	}
	return d
}

func (c *Config) ws(indent string) *etree.CharData {
	cd := etree.NewText(c.src.style.newline + indent)
	cd.SetData(cd.Data)
	return cd
}

// insertChild adds el to parent, after the last child element named afterTag
// (or after the last child element when afterTag is empty or absent), and
// formats el's subtree one level deeper than parent.
func (c *Config) insertChild(parent, el *etree.Element, afterTag string) {
	c.insertChildren(parent, []*etree.Element{el}, afterTag)
}

// insertChildren adds several elements in one pass; adding thousands of rules
// one by one would shift the parent's children thousands of times.
func (c *Config) insertChildren(parent *etree.Element, els []*etree.Element, afterTag string) {
	if len(els) == 0 {
		return
	}
	parentIndent := c.indentOf(parent)
	childIndent := c.prepareChildren(parent, els)

	// Position: right after the chosen element, else after the last element.
	pos := -1
	for i, t := range parent.Child {
		if e, ok := t.(*etree.Element); ok && (afterTag == "" || e.Tag == afterTag) {
			pos = i
		}
	}
	if pos < 0 && afterTag != "" {
		for i, t := range parent.Child {
			if _, ok := t.(*etree.Element); ok {
				pos = i
			}
		}
	}

	var added []etree.Token
	for _, el := range els {
		added = append(added, c.ws(childIndent), el)
	}
	if pos < 0 {
		// No child elements: the new ones go before the closing tag, which
		// then needs its own line.
		keep := removeAllChildren(parent)
		for _, t := range keep {
			if cd, ok := t.(*etree.CharData); ok && cd.IsWhitespace() {
				continue
			}
			parent.AddChild(t)
		}
		for _, t := range added {
			parent.AddChild(t)
		}
		parent.AddChild(c.ws(parentIndent))
		return
	}
	tail := removeChildrenFrom(parent, pos+1)
	for _, t := range added {
		parent.AddChild(t)
	}
	for _, t := range tail {
		parent.AddChild(t)
	}
}

// prepareChildren formats els one level deeper than parent and marks them
// as added by fwab; it returns their indent.
func (c *Config) prepareChildren(parent *etree.Element, els []*etree.Element) string {
	childIndent := c.indentOf(parent) + c.src.style.indent
	for _, el := range els {
		c.format(el, childIndent)
		c.markFresh(el)
	}
	return childIndent
}

// insertChildrenBefore adds els, each on its own line, just before before,
// a child element of parent.
func (c *Config) insertChildrenBefore(parent *etree.Element, els []*etree.Element, before *etree.Element) {
	if len(els) == 0 {
		return
	}
	childIndent := c.prepareChildren(parent, els)
	cut := before.Index()
	if cut > 0 {
		if cd, ok := parent.Child[cut-1].(*etree.CharData); ok && cd.IsWhitespace() {
			cut-- // before keeps the whitespace that led up to it
		}
	}
	tail := removeChildrenFrom(parent, cut)
	for _, el := range els {
		parent.AddChild(c.ws(childIndent))
		parent.AddChild(el)
	}
	if cd, ok := tail[0].(*etree.CharData); !ok || !cd.IsWhitespace() {
		parent.AddChild(c.ws(childIndent))
	}
	for _, t := range tail {
		parent.AddChild(t)
	}
}

// markFresh records el's subtree as added by fwab.
func (c *Config) markFresh(el *etree.Element) {
	c.src.fresh[el] = true
	for _, ch := range el.ChildElements() {
		c.markFresh(ch)
	}
}

// removeChildrenFrom detaches parent's children from index i on and returns them.
func removeChildrenFrom(parent *etree.Element, i int) []etree.Token {
	tail := append([]etree.Token(nil), parent.Child[i:]...)
	for j := len(parent.Child) - 1; j >= i; j-- {
		parent.RemoveChildAt(j)
	}
	return tail
}

func removeAllChildren(parent *etree.Element) []etree.Token { return removeChildrenFrom(parent, 0) }

// removeElements detaches every child element of parent for which drop is
// true, each with the whitespace that led up to it.
func (c *Config) removeElements(parent *etree.Element, drop func(*etree.Element) bool) int {
	children := removeAllChildren(parent)
	var keep []etree.Token
	n := 0
	for _, t := range children {
		if e, ok := t.(*etree.Element); ok && drop(e) {
			n++
			if len(keep) > 0 {
				if cd, ok := keep[len(keep)-1].(*etree.CharData); ok && cd.IsWhitespace() {
					keep = keep[:len(keep)-1]
				}
			}
			continue
		}
		keep = append(keep, t)
	}
	for _, t := range keep {
		parent.AddChild(t)
	}
	return n
}

func (c *Config) removeElement(e *etree.Element) {
	if p := e.Parent(); p != nil {
		c.removeElements(p, func(x *etree.Element) bool { return x == e })
	}
}

// format indents a freshly built subtree whose root sits at indent.
func (c *Config) format(el *etree.Element, indent string) {
	var elems []*etree.Element
	for _, t := range el.Child {
		if e, ok := t.(*etree.Element); ok {
			elems = append(elems, e)
		} else if cd, ok := t.(*etree.CharData); ok && !cd.IsWhitespace() {
			return // mixed content or text: leave as built
		}
	}
	if len(elems) == 0 {
		return
	}
	removeAllChildren(el)
	inner := indent + c.src.style.indent
	for _, e := range elems {
		el.AddChild(c.ws(inner))
		el.AddChild(e)
		c.format(e, inner)
	}
	el.AddChild(c.ws(indent))
}

// ensure returns the element at the slash-separated path below parent,
// creating what is missing.
func (c *Config) ensure(parent *etree.Element, path string) *etree.Element {
	e := parent
	if parent == c.doc.Root() {
		first, _, _ := strings.Cut(path, "/")
		c.touch(first)
	}
	for _, tag := range strings.Split(path, "/") {
		next := e.SelectElement(tag)
		if next == nil {
			next = etree.NewElement(tag)
			c.insertChild(e, next, "")
		}
		c.src.read(next) // a section: what is inside it is needed now
		e = next
	}
	return e
}

// setLeaf sets the text of parent's child element tag, creating it if needed.
// cdata writes new text as a CDATA section, as pfSense does for descriptions.
func (c *Config) setLeaf(parent *etree.Element, tag, text string, cdata bool) *etree.Element {
	e := parent.SelectElement(tag)
	if e == nil {
		e = etree.NewElement(tag)
		c.insertChild(parent, e, "")
	}
	c.setText(e, text, cdata)
	return e
}

// setText replaces an element's text. An existing text node keeps its form
// (CDATA or plain) unless it is new.
func (c *Config) setText(e *etree.Element, text string, cdata bool) {
	for _, t := range e.Child {
		if cd, ok := t.(*etree.CharData); ok {
			if cd.Data == text {
				return
			}
			cd.SetData(text)
			return
		}
	}
	if text == "" {
		return
	}
	if cdata {
		e.CreateCData(text)
	} else {
		e.CreateText(text)
	}
}

// leaf builds <tag>text</tag>.
func leaf(tag, text string) *etree.Element {
	e := etree.NewElement(tag)
	if text != "" {
		e.CreateText(text)
	}
	return e
}

func cdataLeaf(tag, text string) *etree.Element {
	e := etree.NewElement(tag)
	e.CreateCData(text)
	return e
}

func elem(tag string, children ...*etree.Element) *etree.Element {
	e := etree.NewElement(tag)
	for _, ch := range children {
		e.AddChild(ch)
	}
	return e
}

func textLeaf(tag, text string, cdata bool) *etree.Element {
	if cdata {
		return cdataLeaf(tag, text)
	}
	return leaf(tag, text)
}
