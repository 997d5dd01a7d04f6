#!/usr/bin/env bash
# Headless Chromium for the review gallery's browser tests (pytest -m browser); Debian's package.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update
apt-get -o DPkg::Lock::Timeout=600 install -y chromium
