#!/usr/bin/env bash
# Renders the committed icon files from tokenscope.svg. Run it after editing the SVG and commit
# the results; the build only copies them. Needs rsvg-convert (librsvg2-bin) and icotool
# (icoutils), both Debian packages.
set -euo pipefail
cd "$(dirname "$0")"
for size in 48 128 256; do
  rsvg-convert -w "$size" -h "$size" tokenscope.svg -o "tokenscope-$size.png"
done
# The Windows icon: small sizes as bitmaps, 256 px stored as PNG inside the .ico.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for size in 16 24 32 48 64; do
  rsvg-convert -w "$size" -h "$size" tokenscope.svg -o "$tmp/$size.png"
done
icotool -c -o tokenscope.ico "$tmp"/16.png "$tmp"/24.png "$tmp"/32.png "$tmp"/48.png "$tmp"/64.png -r tokenscope-256.png
