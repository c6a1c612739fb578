package configxml

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
)

// GenerateOptions sizes a synthetic pfSense config.
type GenerateOptions struct {
	Rules    int // user filter rules
	RRDBytes int // size of the base64 RRD blob under <rrddata>
}

// GenerateConfig writes a large, realistic pfSense 2.7 config: many filter
// rules as the GUI writes them and an <rrddata> blob, as a box that has run
// for years carries. Benchmarks and size tests use it.
func GenerateConfig(o GenerateOptions) []byte {
	var b bytes.Buffer
	b.Grow(o.RRDBytes + o.Rules*700 + 4096)
	b.WriteString("<?xml version=\"1.0\"?>\n<pfsense>\n\t<version>23.3</version>\n\t<lastchange></lastchange>\n")
	b.WriteString("\t<system>\n\t\t<hostname>big</hostname>\n\t\t<domain>bench.example</domain>\n\t\t<disablesegmentationoffloading></disablesegmentationoffloading>\n\t\t<disablelargereceiveoffloading></disablelargereceiveoffloading>\n\t</system>\n")
	b.WriteString("\t<interfaces>\n\t\t<wan>\n\t\t\t<enable></enable>\n\t\t\t<if>igb0</if>\n\t\t\t<ipaddr>198.19.0.1</ipaddr>\n\t\t\t<subnet>24</subnet>\n\t\t</wan>\n")
	b.WriteString("\t\t<lan>\n\t\t\t<enable></enable>\n\t\t\t<if>igb1</if>\n\t\t\t<ipaddr>198.18.1.1</ipaddr>\n\t\t\t<subnet>24</subnet>\n\t\t</lan>\n\t</interfaces>\n")
	b.WriteString("\t<nat>\n\t\t<outbound>\n\t\t\t<mode>automatic</mode>\n\t\t</outbound>\n\t</nat>\n\t<filter>\n")
	for i := range o.Rules {
		iface := "lan"
		if i%3 == 0 {
			iface = "wan"
		}
		fmt.Fprintf(&b, "\t\t<rule>\n\t\t\t<id></id>\n\t\t\t<tracker>%d</tracker>\n\t\t\t<type>pass</type>\n\t\t\t<interface>%s</interface>\n"+
			"\t\t\t<ipprotocol>inet</ipprotocol>\n\t\t\t<tag></tag>\n\t\t\t<tagged></tagged>\n\t\t\t<max></max>\n\t\t\t<max-src-nodes></max-src-nodes>\n"+
			"\t\t\t<statetype><![CDATA[keep state]]></statetype>\n\t\t\t<os></os>\n\t\t\t<protocol>tcp</protocol>\n"+
			"\t\t\t<source>\n\t\t\t\t<address>198.18.%d.%d</address>\n\t\t\t</source>\n"+
			"\t\t\t<destination>\n\t\t\t\t<address>198.19.%d.%d</address>\n\t\t\t\t<port>%d</port>\n\t\t\t</destination>\n"+
			"\t\t\t<descr><![CDATA[rule %d &amp; friends]]></descr>\n"+
			"\t\t\t<created>\n\t\t\t\t<time>%d</time>\n\t\t\t\t<username><![CDATA[admin@198.18.1.10 (Local Database)]]></username>\n\t\t\t</created>\n\t\t</rule>\n",
			1600000000+i, iface, (i/256)%256, i%256, (i/256)%256, i%256, 1024+i%60000, i, 1600000000+i)
	}
	b.WriteString("\t</filter>\n")
	if o.RRDBytes > 0 {
		rng := rand.New(rand.NewPCG(1, 2))
		raw := make([]byte, o.RRDBytes*3/4)
		for i := range raw {
			raw[i] = byte(rng.Uint32())
		}
		b.WriteString("\t<rrddata>\n\t\t<rrddatafile>\n\t\t\t<filename>wan-traffic.rrd</filename>\n\t\t\t<xmldata>")
		enc := base64.NewEncoder(base64.StdEncoding, &b)
		enc.Write(raw)
		enc.Close()
		b.WriteString("</xmldata>\n\t\t</rrddatafile>\n\t</rrddata>\n")
	}
	b.WriteString("\t<revision>\n\t\t<time>1700000000</time>\n\t\t<description><![CDATA[generated]]></description>\n\t\t<username><![CDATA[bench]]></username>\n\t</revision>\n</pfsense>\n")
	return b.Bytes()
}
