#!/usr/bin/env bash
# Installs what fwab's lab, demo and tests need on a Debian machine.
# Idempotent: packages already present are not fetched again.
set -euo pipefail

packages=(
	iproute2 iptables nftables ethtool iperf3 iputils-ping procps kmod tcsh
	strongswan-swanctl charon-systemd libstrongswan-standard-plugins libstrongswan-extra-plugins libcharon-extra-plugins
	chromium fonts-liberation
	nginx-light nghttp2-client openssl # kind: http: nginx serves, h2load loads, openssl makes the HTTPS certificate
	netsniff-ng # trafgen, the kind: ndr probe's small-frame generator (generator: trafgen)
	7zip # the CPU calibration of the lab's appliance profiles (t730, apu2, e302)
	postgresql # the tests start throwaway servers of their own from its binaries
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if ((${#missing[@]})); then
	if [[ $(id -u) -ne 0 ]]; then
		echo "setup: missing packages: ${missing[*]}" >&2
		echo "setup: run as root, or: sudo apt-get install -y ${missing[*]}" >&2
		exit 1
	fi
	echo "setup: installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

command -v go >/dev/null || export PATH=$PATH:/usr/local/go/bin
go mod download
