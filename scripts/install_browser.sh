#!/usr/bin/env bash
# Installs the headless browser the inbox tests (tests/inbox) drive: Debian's chromium and its
# chromium-driver, from the distribution's package archive (no browser download of its own).
# Idempotent: does nothing when both are present. Needs root (CI runs as root).
set -euo pipefail

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium chromium-driver >/dev/null
/usr/bin/chromium --version
/usr/bin/chromedriver --version
