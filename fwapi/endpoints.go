package fwapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/fwab/fwab/probe"
)

// OpenEndpoints opens the target's first link's traffic hosts for
// probing (OpenLinks). closeAll closes the SSH connections it opened; on
// error nothing is left open.
func (t *Target) OpenEndpoints(ctx context.Context, opts OpenOptions) (client, server probe.Endpoint, closeAll func(), err error) {
	first := t.Endpoints.FirstLink()
	links, closeAll, err := t.OpenLinks(ctx, opts, []string{first})
	if err != nil {
		return client, server, nil, err
	}
	return links[first].Client, links[first].Server, closeAll, nil
}

// OpenLinks opens the named links' traffic hosts: each a local network
// namespace, an SSH host (dialled with opts), or, with neither, this
// machine. closeAll closes the SSH connections it opened; on error
// nothing is left open.
func (t *Target) OpenLinks(ctx context.Context, opts OpenOptions, names []string) (links map[string]probe.Link, closeAll func(), err error) {
	var conns []*SSHClient
	closeAll = func() {
		for _, c := range conns {
			c.Close()
		}
	}
	dial := func(h *SSHHost) (probe.Shell, error) {
		c, err := DialSSHHost(ctx, h, opts)
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
		return probe.StreamShell(c.Stream), nil
	}
	links = map[string]probe.Link{}
	for _, name := range names {
		pair, err := t.Endpoints.Pair(name)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		side := func(s string) string {
			if name == t.Endpoints.FirstLink() {
				return s
			}
			return s + "@" + name
		}
		l := probe.Link{Name: name}
		if l.Client, err = pair.Client.Open(side("client"), dial); err != nil {
			closeAll()
			return nil, nil, err
		}
		if l.Server, err = pair.Server.Open(side("server"), dial); err != nil {
			closeAll()
			return nil, nil, err
		}
		links[name] = l
	}
	return links, closeAll, nil
}

// Open builds the probe endpoint called name: a local network namespace,
// an SSH host (opened with dial), or, with neither, this machine.
func (e Endpoint) Open(name string, dial func(*SSHHost) (probe.Shell, error)) (probe.Endpoint, error) {
	if e.Addr == "" {
		return probe.Endpoint{}, fmt.Errorf("%s endpoint has no addr: set the address traffic goes to or from", name)
	}
	switch {
	case e.Netns != "" && e.SSH != nil:
		return probe.Endpoint{}, fmt.Errorf("%s endpoint sets both netns and ssh: keep one", name)
	case e.Netns != "":
		return probe.Endpoint{Name: name, Addr: e.Addr, Runner: probe.Local{Netns: e.Netns}}, nil
	case e.SSH != nil:
		if dial == nil {
			return probe.Endpoint{}, errors.New(name + " endpoint is an SSH host, but no SSH dialer was given")
		}
		sh, err := dial(e.SSH)
		if err != nil {
			return probe.Endpoint{}, fmt.Errorf("%s endpoint %s: %w", name, e.SSH.Host, err)
		}
		return probe.Endpoint{Name: name, Addr: e.Addr, Runner: probe.ShellRunner{Shell: sh}}, nil
	default:
		return probe.Endpoint{Name: name, Addr: e.Addr, Runner: probe.Local{}}, nil
	}
}
