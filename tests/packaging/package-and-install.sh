#!/usr/bin/env bash
# CTest `package_install`: packs this build tree with its own CPack configuration (the same
# rules tools/package uses on the release build) and runs the install test on the result, so
# every CI run checks the .deb/.tar.gz layout, Depends against ldd, and that the unpacked
# programs run. Usage: package-and-install.sh BUILD_DIR VERSION
set -euo pipefail
build=$1
version=$2
here=$(cd "$(dirname "$0")" && pwd)
for tool in cpack dpkg-deb dpkg-shlibdeps; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is missing (tools/setup-deps installs it)"; exit 1; }
done
out="$build/packages-test"
rm -rf "$out"
if ! (cd "$build" && cpack -G "DEB;TGZ" -B "$out") >"$build/cpack-test.log" 2>&1; then
  cat "$build/cpack-test.log"
  exit 1
fi
"$here/../../packaging/linux/test-install.sh" "$out" "$version"
