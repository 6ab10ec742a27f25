#!/usr/bin/env bash
# Debian's Chromium for the "Stream jobs" page's browser test: Playwright drives it through
# executable_path (Playwright's own browser download is not reachable from this machine kind).
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
echo "browser: installing Debian's chromium (apt-get)"
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends chromium > /dev/null
/usr/bin/chromium --version
