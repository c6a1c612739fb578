package configxml

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"slices"
	"strings"
	"unsafe"

	"github.com/beevik/etree"
)

// Undo and SameIgnoringRevision serve fwab's final restore (issue #28,
// "someone else's change is silently reverted"). During a sweep fwab takes a
// firewall's config.xml from orig, the config before its session, to
// written, the last config it wrote. Meanwhile an admin, ACME renewing a
// certificate or a package may have saved the box's config, which is then
// current. Writing orig back would revert that other edit without a word;
// Undo instead takes fwab's own changes out of current.

// UndoResult is what Undo made of the three configs.
type UndoResult struct {
	// Config is current with fwab's changes undone, to be written back;
	// nil when Conflicts is not empty.
	Config []byte
	// Foreign is what the other edit changed (written → current), for the
	// message: the elements it added, removed, moved or whose text it
	// changed, as paths below the root such as "system/hostname",
	// "filter/rule[3]" or "cert[2]/crt", with [N] counting same-named
	// siblings (from 1, shown only where there are several); an attribute
	// reads "path/@name". Paths are current's, or written's for what the
	// other edit deleted. Sorted. The top-level <revision> is not in it:
	// every save changes it.
	Foreign []string
	// Conflicts are the elements both fwab and the other edit changed:
	// nothing may be written, a person must decide. Sorted, paths as in
	// Foreign.
	Conflicts []string
}

// Undo puts back fwab's own changes (orig → written) on top of current,
// keeping every other edit in current. It is an element-level three-way
// merge and does no I/O.
//
// When current holds what fwab wrote (SameIgnoringRevision), the result is
// orig's bytes but for <revision>. Otherwise it is current, edited as
// little as possible and written as the package writes any change (see
// Config.WriteTo): what Undo does not touch keeps current's bytes, and an
// element put back is laid out like its siblings.
//
// Either way the result's top-level <revision> is current's, untouched:
// the box's newest save is the honest record of the last save (orig's
// would claim a save that is no longer the latest, fwab's one that someone
// else's has overwritten); the caller records its own restore on top of it
// when it writes.
//
// Elements are identified among their siblings (not by index) by, in turn:
// a key (an OPNsense uuid attribute; a <rule>'s <tracker> or <uuid> child;
// a <cert>, <ca> or <crl>'s <refid>); identical content, aligned in
// document order (a longest common subsequence), then anywhere; and, for
// what is left between two aligned elements, the same tag with at least
// half their children identical, or the only element of that tag there on
// both sides. So a rule the admin inserted before fwab's generated rules
// shifts nothing: they are found by key or content. Content is compared
// as SameIgnoringRevision does, so a box that wrote the file anew in its
// own layout changed nothing by that.
//
// Handled:
//
//   - A leaf fwab changed (an offload flag's text, the NAT mode, an IDS
//     setting) gets orig's text back, in orig's form (CDATA or not), unless
//     current changed it too: a conflict, or nothing to do when current
//     holds orig's text. Attributes are merged the same way.
//   - An element fwab added (generated rules, a new <suricata> entry, an
//     MVC <settings> container) is removed from current when current
//     holds it as fwab wrote it, however many places it moved; gone from
//     current, there is nothing to do; changed in current, it is a
//     conflict naming what changed inside.
//   - An element fwab removed is put back under the same parent, after the
//     nearest of its orig siblings that current still has (else before the
//     next, else last), unless current holds it again there (identical:
//     nothing to do; different: a conflict) or the parent is gone from
//     current: a conflict.
//   - An element fwab moved (a flag that a sweep turned off and on again
//     is removed and then appended) is moved back where orig has it,
//     unless current moved it too.
//   - An element fwab changed that current deleted is a conflict.
//   - Every other edit in current — a new rule, a renewed <cert>, a
//     changed <revision>, a reordered list — is kept as current has it.
//
// Not handled:
//
//   - An edit that leaves an element as fwab wrote it cannot be told from
//     no edit: an admin who set, after fwab, the very value fwab had set
//     sees it undone with fwab's change.
//   - Text beside child elements (mixed content; config.xml has none) that
//     fwab changed is a conflict, not merged.
//   - Comments and processing instructions are not compared; those in
//     current are kept as they are, those in orig come back only inside an
//     element put back.
//   - Unkeyed elements whose content both sides changed, among several
//     same-named siblings, may be paired otherwise than a person would:
//     that gives a conflict, or keeps current's element beside the one put
//     back, never silently drops current's.
//   - In a parent with millions of unkeyed children to align (more than
//     lcsCells table cells), the in-order alignment is greedy: a moved
//     element is still found by content, but what is left unmatched around
//     it may pair less well.
func Undo(orig, written, current []byte) (UndoResult, error) {
	return undo(orig, written, current, true)
}

// undo is Undo; shortcut false skips the orig-bytes answer for a current
// that holds what fwab wrote, so that tests can check the merge alone.
func undo(orig, written, current []byte, shortcut bool) (UndoResult, error) {
	var cs [3]*Config
	for i, in := range []struct {
		name string
		data []byte
	}{{"orig", orig}, {"written", written}, {"current", current}} {
		c, err := LoadBytes(in.data)
		if err != nil {
			return UndoResult{}, fmt.Errorf("%s: %w", in.name, err)
		}
		cs[i] = c
	}
	o, w, c := cs[0], cs[1], cs[2]
	if o.flavor != w.flavor || o.flavor != c.flavor {
		return UndoResult{}, fmt.Errorf("the configs are of different products: orig <%s>, written <%s>, current <%s>", o.root().Tag, w.root().Tag, c.root().Tag)
	}
	sm := newSummer()
	if shortcut && sm.sameRoots(w.root(), c.root()) {
		o.replaceRevision(c.section("revision"))
		return UndoResult{Config: o.Bytes()}, nil
	}
	u := &undoer{dst: c, sm: sm}
	u.merge(o.root(), w.root(), c.root(), "", true)
	res := UndoResult{Foreign: sortedSet(u.foreign), Conflicts: sortedSet(u.conflicts)}
	if len(res.Conflicts) == 0 {
		res.Config = c.Bytes()
	}
	return res, nil
}

// SameIgnoringRevision reports whether two config.xml files hold the same
// configuration but for the top-level <revision>, which pfSense and
// OPNsense rewrite on every save.
//
// It parses both (with the package's own reader) and compares content,
// not bytes: indentation and the white space between elements, CDATA or
// escaped text, white space around a text, attribute order, comments and
// processing instructions do not count. The products write the whole file
// anew on every save, in their own layout, so a byte comparison (or cutting
// out the first "<revision>…</revision>" span, which may as well be inside
// a CDATA section or a package's own <revision>) would call a save that
// changed nothing an edit. Only the <revision> directly below the root is
// ignored. Inputs that do not parse are the same only when byte-identical.
func SameIgnoringRevision(a, b []byte) bool {
	da, sa, errA := parse(context.Background(), a)
	db, sb, errB := parse(context.Background(), b)
	if errA != nil || errB != nil {
		return string(a) == string(b)
	}
	sa.readAll(da.Root())
	sb.readAll(db.Root())
	return newSummer().sameRoots(da.Root(), db.Root())
}

// sameRoots compares two documents' roots by content, the top-level
// <revision> aside.
func (sm *summer) sameRoots(a, b *etree.Element) bool {
	return a.FullTag() == b.FullTag() && sameAttrs(a, b) &&
		sm.sum(a, true) == sm.sum(b, true)
}

// replaceRevision gives c the top-level <revision> rev (a copy; none when
// rev is nil), where c's own stood, or last.
func (c *Config) replaceRevision(rev *etree.Element) {
	root := c.root()
	old := root.SelectElement("revision")
	switch {
	case old == nil && rev == nil:
	case old == nil:
		c.insertChild(root, rev.Copy(), "")
	case rev == nil:
		c.removeElement(old)
	default:
		root.InsertChildAt(old.Index(), rev.Copy())
		root.RemoveChild(old)
	}
}

// sum identifies an element's content: tag, attributes (in any order),
// trimmed texts (CDATA or not) and child elements, recursively.
type sum [16]byte

// summer computes sums. It remembers those of elements with child elements
// (a leaf is cheaper to hash again than to look up), so that the merge,
// which asks for a parent's children, then for theirs, reads the document
// once. The merge only edits an element after it has compared it and its
// subtree, so what it remembers is never asked for again once stale.
type summer struct {
	memo map[*etree.Element]sum
	h    hash.Hash
	buf  []byte
}

func newSummer() *summer {
	return &summer{memo: map[*etree.Element]sum{}, h: sha256.New()}
}

// sum is e's sum; top leaves out the root's <revision>.
func (s *summer) sum(e *etree.Element, top bool) sum {
	if v, ok := s.memo[e]; ok && !top {
		return v
	}
	container := false
	for _, t := range e.Child {
		if ch, ok := t.(*etree.Element); ok && !(top && ch.FullTag() == "revision") {
			container = true
			if hasChildElements(ch) {
				s.sum(ch, false)
			}
		}
	}
	s.h.Reset()
	s.buf = s.buf[:0]
	s.element(e, top)
	s.h.Write(s.buf)
	var v sum
	copy(v[:], s.h.Sum(s.buf[:0]))
	if container && !top {
		s.memo[e] = v
	}
	return v
}

// element writes e: its name, attributes and texts, its leaf children in
// full and the sums of the others (computed beforehand).
func (s *summer) element(e *etree.Element, top bool) {
	s.field('<', e.FullTag())
	if len(e.Attr) > 1 {
		attrs := slices.Clone(e.Attr)
		slices.SortFunc(attrs, func(x, y etree.Attr) int { return strings.Compare(x.FullKey(), y.FullKey()) })
		for _, a := range attrs {
			s.field('@', a.FullKey())
			s.field('=', a.Value)
		}
	} else {
		for _, a := range e.Attr {
			s.field('@', a.FullKey())
			s.field('=', a.Value)
		}
	}
	for _, t := range ownTexts(e) {
		s.field('t', t)
	}
	for _, t := range e.Child {
		ch, ok := t.(*etree.Element)
		if !ok || top && ch.FullTag() == "revision" {
			continue
		}
		if v, ok := s.memo[ch]; ok {
			s.buf = append(s.buf, 'S')
			s.buf = append(s.buf, v[:]...)
		} else {
			s.element(ch, false)
		}
	}
	s.buf = append(s.buf, '>')
}

func (s *summer) field(kind byte, str string) {
	s.buf = append(s.buf, kind)
	s.buf = binary.LittleEndian.AppendUint64(s.buf, uint64(len(str)))
	if len(str) > 64<<10 {
		// A large text (an RRD blob) is hashed where it is.
		s.h.Write(s.buf)
		s.buf = s.buf[:0]
		s.h.Write(unsafe.Slice(unsafe.StringData(str), len(str)))
		return
	}
	s.buf = append(s.buf, str...)
	if len(s.buf) > 256<<10 {
		s.h.Write(s.buf)
		s.buf = s.buf[:0]
	}
}

func hasChildElements(e *etree.Element) bool {
	for _, t := range e.Child {
		if _, ok := t.(*etree.Element); ok {
			return true
		}
	}
	return false
}

// ownTexts are the element's runs of text between its child elements,
// trimmed, the empty ones left out.
func ownTexts(e *etree.Element) []string {
	var out []string
	var run []string
	flush := func() {
		var s string
		if len(run) == 1 {
			s = run[0]
		} else {
			s = strings.Join(run, "")
		}
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
		run = run[:0]
	}
	for _, t := range e.Child {
		switch t := t.(type) {
		case *etree.CharData:
			run = append(run, t.Data)
		case *etree.Element:
			flush()
		}
	}
	flush()
	return out
}

// childElements are e's child elements; below the root (top), without the
// <revision>, which Undo leaves as current has it.
func childElements(e *etree.Element, top bool) []*etree.Element {
	ch := e.ChildElements()
	if top {
		ch = slices.DeleteFunc(ch, func(x *etree.Element) bool { return x.FullTag() == "revision" })
	}
	return ch
}

func sameAttrs(a, b *etree.Element) bool {
	if len(a.Attr) != len(b.Attr) {
		return false
	}
	for _, x := range a.Attr {
		if y := b.SelectAttr(x.FullKey()); y == nil || y.Value != x.Value {
			return false
		}
	}
	return true
}

// undoer merges into dst's document and collects what it finds.
type undoer struct {
	dst                *Config
	sm                 *summer
	foreign, conflicts []string
}

// siblings is one parent's child elements with what the merge needs of
// them.
type siblings struct {
	els   []*etree.Element
	sums  []sum
	paths []string
}

func (sm *summer) siblings(parent *etree.Element, path string, top bool) siblings {
	els := childElements(parent, top)
	s := siblings{els: els, sums: make([]sum, len(els)), paths: make([]string, len(els))}
	count := map[string]int{}
	for _, e := range els {
		count[e.FullTag()]++
	}
	seen := map[string]int{}
	for i, e := range els {
		s.sums[i] = sm.sum(e, false)
		tag := e.FullTag()
		seen[tag]++
		step := tag
		if count[tag] > 1 {
			step = fmt.Sprintf("%s[%d]", tag, seen[tag])
		}
		s.paths[i] = joinPath(path, step)
	}
	return s
}

// merge undoes, in c, what changed from o to w: the same element in orig,
// written and current. path is c's.
func (u *undoer) merge(o, w, c *etree.Element, path string, top bool) {
	at := path
	if at == "" {
		at = c.FullTag()
	}
	u.mergeAttrs(o, w, c, at)

	os, ws, cs := u.sm.siblings(o, path, top), u.sm.siblings(w, path, top), u.sm.siblings(c, path, top)
	if len(os.els) == 0 && len(ws.els) == 0 && len(cs.els) == 0 {
		u.mergeLeaf(o, w, c, at)
		return
	}
	ot, wt, ct := ownTexts(o), ownTexts(w), ownTexts(c)
	switch {
	case slices.Equal(ot, wt):
		if !slices.Equal(ct, wt) {
			u.foreign = append(u.foreign, at)
		}
	case slices.Equal(ct, ot):
		u.foreign = append(u.foreign, at)
	default:
		// Text beside child elements that fwab changed: not undone.
		u.conflicts = append(u.conflicts, at)
		if !slices.Equal(ct, wt) {
			u.foreign = append(u.foreign, at)
		}
	}

	w2o, o2w := u.sm.match(ws, os)
	w2c, c2w := u.sm.match(ws, cs)
	// inC is each orig child's element in current, once known.
	inC := make([]*etree.Element, len(os.els))
	drop := map[*etree.Element]bool{}
	for j := range ws.els {
		i, k := w2o[j], w2c[j]
		switch {
		case i >= 0 && k >= 0:
			inC[i] = cs.els[k]
			switch {
			case os.sums[i] == ws.sums[j]:
				u.differences(ws.els[j], cs.els[k], cs.paths[k], false, &u.foreign)
			case cs.sums[k] == ws.sums[j], cs.sums[k] != os.sums[i]:
				u.merge(os.els[i], ws.els[j], cs.els[k], cs.paths[k], false)
			default:
				// current already holds orig's element.
				u.differences(ws.els[j], cs.els[k], cs.paths[k], false, &u.foreign)
			}
		case i >= 0: // current deleted it
			u.foreign = append(u.foreign, ws.paths[j])
			if os.sums[i] != ws.sums[j] {
				u.conflicts = append(u.conflicts, ws.paths[j])
			}
		case k >= 0: // fwab added it
			if cs.sums[k] == ws.sums[j] {
				drop[cs.els[k]] = true
				continue
			}
			n := len(u.foreign)
			u.differences(ws.els[j], cs.els[k], cs.paths[k], false, &u.foreign)
			u.conflicts = append(u.conflicts, u.foreign[n:]...)
		default: // fwab added it, current deleted it
			u.foreign = append(u.foreign, ws.paths[j])
		}
	}

	// What current added: kept. An element fwab removed that current has
	// again is matched among them.
	var added, removed []int
	for k := range cs.els {
		if c2w[k] < 0 {
			added = append(added, k)
			u.foreign = append(u.foreign, cs.paths[k])
		}
	}
	for i := range os.els {
		if o2w[i] < 0 {
			removed = append(removed, i)
		}
	}
	r2a, _ := u.sm.match(os.subset(removed), cs.subset(added))
	// place are the orig children to put where orig has them: those fwab
	// removed (a copy of orig's) and those fwab moved that current still
	// holds where written has them (current's, merged above).
	place := map[int]*etree.Element{}
	for n, i := range removed {
		if m := r2a[n]; m >= 0 {
			k := added[m]
			inC[i] = cs.els[k]
			if cs.sums[k] != os.sums[i] {
				u.conflicts = append(u.conflicts, cs.paths[k])
			}
			continue
		}
		place[i] = nil
	}
	movedByFwab, movedByOther := outOfOrder(o2w), outOfOrder(w2c)
	for j, moved := range movedByOther {
		if moved {
			u.foreign = append(u.foreign, cs.paths[w2c[j]])
		}
	}
	for i, j := range o2w {
		if movedByFwab[i] && w2c[j] >= 0 && !movedByOther[j] {
			place[i] = inC[i]
		}
	}
	if len(u.conflicts) > 0 {
		return // nothing will be written
	}
	if len(drop) > 0 {
		u.dst.removeElements(c, func(e *etree.Element) bool { return drop[e] })
	}
	for i := range os.els {
		el, ok := place[i]
		if !ok {
			continue
		}
		if el == nil {
			el = os.els[i].Copy()
			u.dst.prepareChildren(c, []*etree.Element{el})
		} else {
			u.dst.removeElement(el)
		}
		delete(place, i)
		u.putBack(c, el, i, inC, place)
		inC[i] = el
	}
}

// outOfOrder reports, for each element of a list paired with one of
// another (a2b), whether it is out of the order the others keep: not in a
// longest run of pairs in the same order in both lists.
func outOfOrder(a2b []int) []bool {
	var idx []int // the paired elements, in order
	for i, j := range a2b {
		if j >= 0 {
			idx = append(idx, i)
		}
	}
	var tails []int // tails[n]: the position in idx ending the best run of n+1
	prev := make([]int, len(idx))
	for p, i := range idx {
		v := a2b[i]
		n, _ := slices.BinarySearchFunc(tails, v, func(t, v int) int { return a2b[idx[t]] - v })
		prev[p] = -1
		if n > 0 {
			prev[p] = tails[n-1]
		}
		if n == len(tails) {
			tails = append(tails, p)
		} else {
			tails[n] = p
		}
	}
	keep := make([]bool, len(a2b))
	if len(tails) > 0 {
		for p := tails[len(tails)-1]; p >= 0; p = prev[p] {
			keep[idx[p]] = true
		}
	}
	out := make([]bool, len(a2b))
	for i, j := range a2b {
		out[i] = j >= 0 && !keep[i]
	}
	return out
}

// subset is the siblings at the given indexes.
func (s siblings) subset(idx []int) siblings {
	out := siblings{}
	for _, i := range idx {
		out.els = append(out.els, s.els[i])
		out.sums = append(out.sums, s.sums[i])
		out.paths = append(out.paths, s.paths[i])
	}
	return out
}

// putBack inserts el, orig's child i, into parent: after the nearest
// earlier orig sibling current has, else before the nearest later one that
// stays where it is (not in pending), else last.
func (u *undoer) putBack(parent, el *etree.Element, i int, inC []*etree.Element, pending map[int]*etree.Element) {
	for j := i - 1; j >= 0; j-- {
		if a := inC[j]; a != nil && a.Parent() == parent {
			u.dst.insertAfter(parent, el, a)
			return
		}
	}
	for j := i + 1; j < len(inC); j++ {
		if _, moves := pending[j]; !moves && inC[j] != nil && inC[j].Parent() == parent {
			u.dst.insertBefore(parent, el, inC[j])
			return
		}
	}
	u.dst.insertLast(parent, el)
}

// insertAfter adds el on its own line right after after, a child element
// of parent, indented like its siblings.
func (c *Config) insertAfter(parent, el, after *etree.Element) {
	tail := removeChildrenFrom(parent, after.Index()+1)
	parent.AddChild(c.ws(c.indentOf(after)))
	parent.AddChild(el)
	for _, t := range tail {
		parent.AddChild(t)
	}
}

// insertBefore adds el on its own line right before before, a child
// element of parent, indented like it.
func (c *Config) insertBefore(parent, el, before *etree.Element) {
	indent := c.indentOf(before)
	cut := before.Index()
	if cut > 0 {
		if cd, ok := parent.Child[cut-1].(*etree.CharData); ok && cd.IsWhitespace() {
			cut-- // before keeps the whitespace that led up to it
		}
	}
	tail := removeChildrenFrom(parent, cut)
	parent.AddChild(c.ws(indent))
	parent.AddChild(el)
	if cd, ok := tail[0].(*etree.CharData); !ok || !cd.IsWhitespace() {
		parent.AddChild(c.ws(indent))
	}
	for _, t := range tail {
		parent.AddChild(t)
	}
}

// insertLast adds el after parent's last child element.
func (c *Config) insertLast(parent, el *etree.Element) {
	if last := lastChildElement(parent); last != nil {
		c.insertAfter(parent, el, last)
		return
	}
	// No child elements: insertChildren lays out the parent's lines;
	// it formats el anew, which changes only white space.
	c.insertChildren(parent, []*etree.Element{el}, "")
}

func lastChildElement(e *etree.Element) *etree.Element {
	for i := len(e.Child) - 1; i >= 0; i-- {
		if ch, ok := e.Child[i].(*etree.Element); ok {
			return ch
		}
	}
	return nil
}

// mergeAttrs undoes fwab's attribute changes on c.
func (u *undoer) mergeAttrs(o, w, c *etree.Element, at string) {
	var keys []string
	for _, e := range []*etree.Element{o, w, c} {
		for _, a := range e.Attr {
			if !slices.Contains(keys, a.FullKey()) {
				keys = append(keys, a.FullKey())
			}
		}
	}
	slices.Sort(keys)
	get := func(e *etree.Element, k string) (string, bool) {
		if a := e.SelectAttr(k); a != nil {
			return a.Value, true
		}
		return "", false
	}
	for _, k := range keys {
		ov, oh := get(o, k)
		wv, wh := get(w, k)
		cv, ch := get(c, k)
		fwab, other := ov != wv || oh != wh, cv != wv || ch != wh
		if other {
			u.foreign = append(u.foreign, at+"/@"+k)
		}
		switch {
		case !fwab:
		case !other:
			if oh {
				c.CreateAttr(k, ov)
			} else {
				c.RemoveAttr(k)
			}
		case cv != ov || ch != oh:
			u.conflicts = append(u.conflicts, at+"/@"+k)
		}
	}
}

// mergeLeaf undoes fwab's change of a leaf's text.
func (u *undoer) mergeLeaf(o, w, c *etree.Element, at string) {
	ot, wt, ct := undoLeafText(o), undoLeafText(w), undoLeafText(c)
	if ct != wt {
		u.foreign = append(u.foreign, at)
	}
	switch {
	case ot == wt:
	case ct == wt:
		u.setTextFrom(c, o)
	case ct != ot:
		u.conflicts = append(u.conflicts, at)
	}
}

func undoLeafText(e *etree.Element) string { return strings.Join(ownTexts(e), "\x00") }

// setTextFrom gives the leaf c o's text, in o's form (CDATA or not).
func (u *undoer) setTextFrom(c, o *etree.Element) {
	var keep []etree.Token
	for _, t := range removeAllChildren(c) {
		if _, ok := t.(*etree.CharData); !ok {
			keep = append(keep, t)
		}
	}
	for _, t := range o.Child {
		if cd, ok := t.(*etree.CharData); ok {
			n := etree.NewText(cd.Data)
			if cd.IsCData() {
				n = etree.NewCData(cd.Data)
			}
			n.SetData(cd.Data)
			c.AddChild(n)
		}
	}
	for _, t := range keep {
		c.AddChild(t)
	}
	if len(c.Child) == 0 {
		u.dst.src.fresh[c] = true // empty: written in the document's style
	}
}

// differences adds to out the paths where c differs from w (the same
// element): leaves and attributes that changed, elements added, removed or
// moved.
func (u *undoer) differences(w, c *etree.Element, path string, top bool, out *[]string) {
	at := path
	if at == "" {
		at = c.FullTag()
	}
	if !sameAttrs(w, c) {
		*out = append(*out, at)
	}
	ws, cs := u.sm.siblings(w, path, top), u.sm.siblings(c, path, top)
	if !slices.Equal(ownTexts(w), ownTexts(c)) {
		*out = append(*out, at)
	}
	w2c, c2w := u.sm.match(ws, cs)
	moved := outOfOrder(w2c)
	for j, k := range w2c {
		switch {
		case moved[j]:
			*out = append(*out, cs.paths[k])
			if ws.sums[j] != cs.sums[k] {
				u.differences(ws.els[j], cs.els[k], cs.paths[k], false, out)
			}
		case k < 0:
			*out = append(*out, ws.paths[j])
		case ws.sums[j] != cs.sums[k]:
			u.differences(ws.els[j], cs.els[k], cs.paths[k], false, out)
		}
	}
	for k, j := range c2w {
		if j < 0 {
			*out = append(*out, cs.paths[k])
		}
	}
}

// siblingKey is an element's identity among its siblings when it has one:
// OPNsense's uuid attribute, a rule's tracker (pfSense) or uuid child (the
// Suricata package), a certificate's refid.
//
// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:3687 — `$rule['tracker']` identifies a rule
func siblingKey(e *etree.Element) string {
	if id := e.SelectAttrValue("uuid", ""); id != "" {
		return e.FullTag() + `[@uuid="` + id + `"]`
	}
	var child []string
	switch e.Tag {
	case "rule":
		child = []string{"tracker", "uuid"}
	case "cert", "ca", "crl":
		child = []string{"refid"}
	}
	for _, name := range child {
		if id := childText(e, name); id != "" {
			return e.FullTag() + "[" + name + "=" + id + "]"
		}
	}
	return ""
}

// lcsCells bounds the alignment table of one parent's unmatched children.
const lcsCells = 1 << 22

// pairLimit bounds the similarity comparisons in one gap between aligned
// children.
const pairLimit = 1 << 16

// match pairs the elements of a with those of b that are the same
// element: by key, then by content in order, then by content anywhere,
// then, between two aligned elements, by tag and likeness. It returns each
// one's partner's index, or -1.
func (sm *summer) match(a, b siblings) (a2b, b2a []int) {
	a2b, b2a = filled(len(a.els)), filled(len(b.els))
	pair := func(i, j int) { a2b[i], b2a[j] = j, i }

	// By key.
	keysA, keysB := make([]string, len(a.els)), make([]string, len(b.els))
	byKey := map[string][]int{}
	for j, e := range b.els {
		if keysB[j] = siblingKey(e); keysB[j] != "" {
			byKey[keysB[j]] = append(byKey[keysB[j]], j)
		}
	}
	for i, e := range a.els {
		if keysA[i] = siblingKey(e); keysA[i] != "" {
			if q := byKey[keysA[i]]; len(q) > 0 {
				pair(i, q[0])
				byKey[keysA[i]] = q[1:]
			}
		}
	}

	// By content, in order.
	ra, rb := unpaired(a2b), unpaired(b2a)
	aligned := alignSums(ra, rb, a.sums, b.sums)
	gapA, gapB := make([]int, len(a.els)), make([]int, len(b.els))
	x, y, g := 0, 0, 0
	for _, m := range aligned {
		for ; ra[x] != m[0]; x++ {
			gapA[ra[x]] = g
		}
		for ; rb[y] != m[1]; y++ {
			gapB[rb[y]] = g
		}
		pair(m[0], m[1])
		x, y, g = x+1, y+1, g+1
	}
	for ; x < len(ra); x++ {
		gapA[ra[x]] = g
	}
	for ; y < len(rb); y++ {
		gapB[rb[y]] = g
	}

	// By content, anywhere: a moved element.
	bySum := map[sum][]int{}
	for _, j := range unpaired(b2a) {
		bySum[b.sums[j]] = append(bySum[b.sums[j]], j)
	}
	for _, i := range unpaired(a2b) {
		if q := bySum[a.sums[i]]; len(q) > 0 {
			pair(i, q[0])
			bySum[a.sums[i]] = q[1:]
		}
	}

	// By likeness, within each gap, among elements without a key.
	type group struct{ a, b []int }
	gaps := map[int]map[string]*group{}
	var order []int
	add := func(gap int, tag string) *group {
		m := gaps[gap]
		if m == nil {
			m = map[string]*group{}
			gaps[gap] = m
			order = append(order, gap)
		}
		if m[tag] == nil {
			m[tag] = &group{}
		}
		return m[tag]
	}
	for _, i := range unpaired(a2b) {
		if keysA[i] == "" {
			grp := add(gapA[i], a.els[i].FullTag())
			grp.a = append(grp.a, i)
		}
	}
	for _, j := range unpaired(b2a) {
		if keysB[j] == "" {
			grp := add(gapB[j], b.els[j].FullTag())
			grp.b = append(grp.b, j)
		}
	}
	slices.Sort(order)
	for _, gap := range order {
		tags := make([]string, 0, len(gaps[gap]))
		for tag := range gaps[gap] {
			tags = append(tags, tag)
		}
		slices.Sort(tags)
		for _, tag := range tags {
			grp := gaps[gap][tag]
			if len(grp.a) == 0 || len(grp.b) == 0 {
				continue
			}
			if len(grp.a) == 1 && len(grp.b) == 1 {
				pair(grp.a[0], grp.b[0])
				continue
			}
			budget, next := pairLimit, 0
			for _, i := range grp.a {
				for n := next; n < len(grp.b) && budget > 0; n++ {
					budget--
					if sm.alike(a.els[i], b.els[grp.b[n]]) {
						pair(i, grp.b[n])
						next = n + 1
						break
					}
				}
			}
		}
	}
	return a2b, b2a
}

func filled(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = -1
	}
	return s
}

func unpaired(partner []int) []int {
	var out []int
	for i, p := range partner {
		if p < 0 {
			out = append(out, i)
		}
	}
	return out
}

// alignSums aligns ra and rb (indexes into sa and sb) on equal sums, in
// order: a longest common subsequence when the table fits, else greedily.
func alignSums(ra, rb []int, sa, sb []sum) [][2]int {
	var out [][2]int
	p := 0
	for p < len(ra) && p < len(rb) && sa[ra[p]] == sb[rb[p]] {
		out = append(out, [2]int{ra[p], rb[p]})
		p++
	}
	s := 0
	for s < len(ra)-p && s < len(rb)-p && sa[ra[len(ra)-1-s]] == sb[rb[len(rb)-1-s]] {
		s++
	}
	ma, mb := ra[p:len(ra)-s], rb[p:len(rb)-s]
	n, m := len(ma), len(mb)
	switch {
	case n == 0 || m == 0:
	case (n+1)*(m+1) <= lcsCells:
		// l[i*(m+1)+j] is the LCS length of ma[i:] and mb[j:].
		l := make([]int32, (n+1)*(m+1))
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if sa[ma[i]] == sb[mb[j]] {
					l[i*(m+1)+j] = l[(i+1)*(m+1)+j+1] + 1
				} else {
					l[i*(m+1)+j] = max(l[(i+1)*(m+1)+j], l[i*(m+1)+j+1])
				}
			}
		}
		for i, j := 0, 0; i < n && j < m; {
			switch {
			case sa[ma[i]] == sb[mb[j]] && l[i*(m+1)+j] == l[(i+1)*(m+1)+j+1]+1:
				out = append(out, [2]int{ma[i], mb[j]})
				i, j = i+1, j+1
			case l[(i+1)*(m+1)+j] >= l[i*(m+1)+j+1]:
				i++
			default:
				j++
			}
		}
	default:
		at := map[sum][]int{}
		for j, x := range mb {
			at[sb[x]] = append(at[sb[x]], j)
		}
		last := -1
		for _, x := range ma {
			q := at[sa[x]]
			for len(q) > 0 && q[0] <= last {
				q = q[1:]
			}
			if len(q) > 0 {
				last = q[0]
				out = append(out, [2]int{x, mb[last]})
				q = q[1:]
			}
			at[sa[x]] = q
		}
	}
	for i := s; i > 0; i-- {
		out = append(out, [2]int{ra[len(ra)-i], rb[len(rb)-i]})
	}
	return out
}

// alike reports whether two same-named elements are one element changed:
// both leaves, or at least half the children of the larger identical.
func (sm *summer) alike(x, y *etree.Element) bool {
	xc, yc := x.ChildElements(), y.ChildElements()
	if len(xc) == 0 && len(yc) == 0 {
		return true
	}
	if len(xc) == 0 || len(yc) == 0 {
		return false
	}
	have := map[sum]int{}
	for _, e := range xc {
		have[sm.sum(e, false)]++
	}
	common := 0
	for _, e := range yc {
		s := sm.sum(e, false)
		if have[s] > 0 {
			have[s]--
			common++
		}
	}
	return 2*common >= max(len(xc), len(yc))
}

func sortedSet(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
