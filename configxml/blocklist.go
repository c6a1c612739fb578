package configxml

// pfBlockerNG's master switch: installedpackages/pfblockerng/config/enable_cb,
// "on" or empty (firewall.md A-f). The package does not exist on OPNsense.

const pfbPath = "installedpackages/pfblockerng/config"

func getBlocklist(c *Config, _ string) (string, error) {
	if e := c.find(pfbPath + "/enable_cb"); e != nil && e.Text() == "on" {
		return "on", nil
	}
	return "off", nil
}

func setBlocklist(c *Config, _ string, value string) error {
	cfg := c.ensure(c.top(), pfbPath)
	text := ""
	if value == "on" {
		text = "on"
	}
	c.setLeaf(cfg, "enable_cb", text, false)
	return nil
}
