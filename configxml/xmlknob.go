package configxml

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/beevik/etree"
)

// The escape hatch: xml:PATH=value sets the text of any element. PATH is
// slash-separated from the root element ("system/hostname"; a leading
// "/pfsense/" or "/opnsense/" is accepted), and a step may pick one of
// several same-named siblings with a 1-based index: "filter/rule[2]/descr".
// Missing plain steps are created. The value !absent removes the element.

const xmlAbsent = "!absent"

var xmlStep = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.\-]*(\[[1-9][0-9]*\])?$`)

func (c *Config) xmlSteps(path string) ([]string, error) {
	path = strings.Trim(path, "/")
	if rest, ok := strings.CutPrefix(path, c.top().Tag+"/"); ok {
		path = rest
	}
	if path == "" {
		return nil, fmt.Errorf("the path names the root element; name an element below it, e.g. system/hostname")
	}
	steps := strings.Split(path, "/")
	for _, s := range steps {
		if !xmlStep.MatchString(s) {
			return nil, fmt.Errorf("path step %q is not an element name (optionally with [N]); write paths like system/hostname or filter/rule[2]/descr", s)
		}
	}
	return steps, nil
}

func validateXML(c *Config, path, value string) error {
	steps, err := c.xmlSteps(path)
	if err != nil || value == xmlAbsent {
		return err
	}
	e := c.top()
	for i, s := range steps {
		next := c.step(e, s)
		if next == nil {
			if strings.Contains(strings.Join(steps[i:], "/"), "[") {
				return fmt.Errorf("no element %s to change; only plain steps are created", strings.Join(steps[:i+1], "/"))
			}
			return nil
		}
		e = next
	}
	return nil
}

func (c *Config) xmlFind(steps []string) *etree.Element {
	return c.find(strings.Join(steps, "/"))
}

// step is e's child the path step s names, read if it is a section.
func (c *Config) step(e *etree.Element, s string) *etree.Element {
	next := e.FindElement("./" + s)
	if e == c.doc.Root() {
		tag, _, _ := strings.Cut(s, "[")
		c.touch(tag)
		if next != nil {
			c.src.read(next)
		}
	}
	return next
}

// xmlParts: an xml: knob lives in the section its path starts in.
func xmlParts(c *Config, path string) ([]string, []string) {
	steps, err := c.xmlSteps(path)
	if err != nil {
		return []string{"*"}, []string{"*"}
	}
	tag, _, _ := strings.Cut(steps[0], "[")
	return []string{tag}, []string{tag}
}

func getXML(c *Config, path string) (string, error) {
	steps, err := c.xmlSteps(path)
	if err != nil {
		return "", err
	}
	e := c.xmlFind(steps)
	if e == nil {
		return xmlAbsent, nil
	}
	for _, t := range e.Child {
		if _, ok := t.(*etree.Element); ok {
			return "", fmt.Errorf("element %s has child elements; the xml knob sets text only", path)
		}
	}
	return e.Text(), nil
}

func setXML(c *Config, path, value string) error {
	steps, err := c.xmlSteps(path)
	if err != nil {
		return err
	}
	if value == xmlAbsent {
		if e := c.xmlFind(steps); e != nil {
			c.removeElement(e)
		}
		return nil
	}
	e := c.top()
	for i, s := range steps {
		next := c.step(e, s)
		if next == nil {
			if strings.Contains(s, "[") {
				return fmt.Errorf("no element %s to change; only plain steps are created", strings.Join(steps[:i+1], "/"))
			}
			next = etree.NewElement(s)
			c.insertChild(e, next, s)
		}
		e = next
	}
	for _, t := range e.Child {
		if _, ok := t.(*etree.Element); ok {
			return fmt.Errorf("element %s has child elements; the xml knob sets text only", path)
		}
	}
	c.setText(e, value, false)
	return nil
}
