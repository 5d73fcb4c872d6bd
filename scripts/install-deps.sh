#!/usr/bin/env bash
# Installs what building and testing cdc_apply needs on Debian 12 with the
# PostgreSQL 15 server already present.  Idempotent; needs root (or sudo).
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
PKGS=(postgresql-15 postgresql-server-dev-15 postgresql-15-pgtap libpq-dev libssl-dev
      g++ make cmake googletest libgtest-dev nlohmann-json3-dev
      libipc-run-perl perl)
missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	echo "installing: ${missing[*]}"
	$SUDO apt-get update -q
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
