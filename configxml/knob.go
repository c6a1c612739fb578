package configxml

// Flavor is the firewall product a config.xml belongs to.
type Flavor string

const (
	PfSense  Flavor = "pfsense"
	OPNsense Flavor = "opnsense"
)

// Action is the narrowest service action that makes a knob's change take
// effect. fwapi maps each action to the product's own command or API call.
type Action string

const (
	ActionFilterReload    Action = "filter-reload"          // rules, nat.outbound
	ActionInterfaces      Action = "interfaces-reconfigure" // offload.*
	ActionIDSRestart      Action = "ids-restart"            // ids@IF
	ActionIPsecRestart    Action = "ipsec-restart"          // ipsec@TUNNEL
	ActionBlocklistUpdate Action = "blocklist-update"       // blocklist
	ActionFirmware        Action = "firmware-upgrade"       // firmware
	ActionNone            Action = "none"                   // xml escape hatch: the caller names the action
)

// Change is one knob whose value differs between two configs.
type Change struct {
	Knob   string // full knob reference, e.g. "offload.tso", "ids@lan", "rules@lan"
	From   string
	To     string
	Action Action
}
