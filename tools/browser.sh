#!/usr/bin/env bash
# Chromium for the browser test of report.html: Debian's package, installed with apt-get as
# root (Playwright drives it through executable_path; it cannot download browsers here).
# Elsewhere it says in one line how to get one, and the test skips with that line.
set -uo pipefail
for name in chromium chromium-browser google-chrome; do
  if command -v "$name" >/dev/null 2>&1; then
    echo "browser: $(command -v "$name")"
    exit 0
  fi
done
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get install -y -qq chromium >/dev/null || { apt-get update -qq >/dev/null && apt-get install -y -qq chromium >/dev/null; } \
    || { echo "error: apt-get could not install chromium" >&2; exit 1; }
  echo "browser: $(command -v chromium)"
  exit 0
fi
echo "note: no Chromium here; install your system's chromium (Debian: apt-get install chromium) or set CHROMIUM=<path>" >&2
exit 0
