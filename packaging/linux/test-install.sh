#!/usr/bin/env bash
# Install test for the Linux packages that tools/package makes.
#
#   packaging/linux/test-install.sh PACKAGE_DIR VERSION
#
# 1. Unpacks tokenscope_<VERSION>_<arch>.deb (and tokenscope-cuda_..., when present) with
#    `dpkg -x` into a fresh temporary root; nothing is installed on this machine.
# 2. Checks the payload: executables, desktop entry (desktop-file-validate), AppStream metainfo
#    (appstreamcli validate --no-net), icons, docs, and the CUDA plugin in usr/lib/tokenscope.
# 3. Libraries: `ldd` must resolve every library of every ELF file in each package, and each
#    library an ELF file names directly (NEEDED) must come from a package that the .deb's
#    Depends names (`dpkg -S` on the resolved path; for tokenscope-cuda also what tokenscope
#    itself depends on, since it depends on tokenscope exactly). cuBLAS is not from dpkg here
#    (NVIDIA's tarball), so libcublas*.so map to the NVIDIA package named in Depends. The Qt
#    plugins the app loads at run time (SQLite driver, xcb platform) are checked the same way.
# 4. Runs the unpacked programs: `tokenscope-cli --version` and `tokenscope --version` print
#    VERSION; `tokenscope-cli devices` finds the CUDA plugin relative to the executable; the
#    app saves an offscreen screenshot after one exchange with a tiny synthetic model made by
#    the unpacked `tokenscope-cli make-model` (the app needs a model to answer), and the PNG
#    must be a real image of the window.
# 5. Unpacks tokenscope-<VERSION>-Linux-<cpu>.tar.gz and runs the same --version and devices
#    checks from that folder; when it bundles its libraries (bin/qt.conf), the app makes a
#    screenshot from the folder and every Qt/ICU/spdlog/fmt/sentencepiece library and Qt plugin
#    it loads must come from the folder (LD_DEBUG=files), and the .deb must not carry them.
# 6. Only with TOKENSCOPE_TEST_APT=1, as root, on a machine you may change: `apt-get install
#    ./tokenscope_<VERSION>_<arch>.deb`, runs /usr/bin/tokenscope-cli --version, then purges
#    the package again.
# Exit status 0 when every check passed; each failure is one line starting with "FAIL".
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 PACKAGE_DIR VERSION" >&2
  exit 2
fi
package_dir=$(cd "$1" && pwd)
version=$2
arch=$(dpkg --print-architecture)
cpu=$(uname -m)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)

runtime_deb="$package_dir/tokenscope_${version}_${arch}.deb"
cuda_deb="$package_dir/tokenscope-cuda_${version}_${arch}.deb"
tgz="$package_dir/tokenscope-${version}-Linux-${cpu}.tar.gz"
app_id=io.github.tokenscope.tokenscope

work=$(mktemp -d /tmp/tokenscope-install-test.XXXXXX)
trap '[ -n "${TOKENSCOPE_KEEP_TEST_DIR:-}" ] || rm -rf "$work"' EXIT
failures=0
checks=0
pass() { checks=$((checks + 1)); }
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
check() {  # check DESCRIPTION COMMAND...: one check, quiet unless it fails
  local what=$1
  shift
  if "$@" >"$work/check.log" 2>&1; then
    pass
  else
    fail "$what"
    sed 's/^/      /' "$work/check.log" | head -20
  fi
}

[ -f "$runtime_deb" ] || { echo "FAIL: $runtime_deb not found"; exit 1; }
[ -f "$tgz" ] || { echo "FAIL: $tgz not found"; exit 1; }
debs=("$runtime_deb")
[ -f "$cuda_deb" ] && debs+=("$cuda_deb")

# --- 1. unpack -----------------------------------------------------------------------------
root="$work/root"
mkdir -p "$root"
for deb in "${debs[@]}"; do
  dpkg -x "$deb" "$root" || fail "dpkg -x $deb"
done
echo "unpacked ${debs[*]##*/} into a temporary root with dpkg -x"

# --- 2. payload ----------------------------------------------------------------------------
for f in usr/bin/tokenscope usr/bin/tokenscope-cli \
         "usr/share/applications/$app_id.desktop" "usr/share/metainfo/$app_id.metainfo.xml" \
         usr/share/icons/hicolor/scalable/apps/tokenscope.svg \
         usr/share/icons/hicolor/48x48/apps/tokenscope.png \
         usr/share/icons/hicolor/128x128/apps/tokenscope.png \
         usr/share/icons/hicolor/256x256/apps/tokenscope.png \
         usr/share/doc/tokenscope/README.md; do
  check "tokenscope contains /$f" test -s "$root/$f"
done
if [ -f "$cuda_deb" ]; then
  check "tokenscope-cuda contains /usr/lib/tokenscope/libtokenscope_cuda.so" test -s "$root/usr/lib/tokenscope/libtokenscope_cuda.so"
fi
check "desktop-file-validate $app_id.desktop" desktop-file-validate "$root/usr/share/applications/$app_id.desktop"
check "appstreamcli validate --no-net $app_id.metainfo.xml" \
  appstreamcli validate --no-net "$root/usr/share/metainfo/$app_id.metainfo.xml"
check "the metainfo names release $version" grep -q "<release version=\"$version\"" "$root/usr/share/metainfo/$app_id.metainfo.xml"
check "the desktop entry starts tokenscope" grep -qx "Exec=tokenscope" "$root/usr/share/applications/$app_id.desktop"
for deb in "${debs[@]}"; do
  check "${deb##*/}: Version is $version" test "$(dpkg-deb -f "$deb" Version)" = "$version"
done

# --- 3. libraries --------------------------------------------------------------------------
# Package names in a Depends field: alternatives flattened, versions and arch qualifiers dropped.
depends_names() {
  dpkg-deb -f "$1" Depends | tr ',|' '\n\n' | sed -e 's/(.*)//' -e 's/:.*//' -e 's/[[:space:]]//g' | grep -v '^$' | sort -u
}
# The dpkg package owning a file, trying the path as given, its real path and the /usr-merged
# twin (Debian 12 registers some libraries under /lib, some under /usr/lib).
owner_of() {
  local path=$1 candidate
  for candidate in "$path" "$(readlink -f "$path")" "${path#/usr}" "/usr$path"; do
    if out=$(dpkg -S "$candidate" 2>/dev/null); then
      echo "${out%%: *}" | tr ',' '\n' | sed -e 's/:.*//' -e 's/[[:space:]]//g' | head -1
      return 0
    fi
  done
  return 1
}
is_elf() { [ "$(head -c 4 "$1" 2>/dev/null)" = $'\x7fELF' ]; }

declare -A allowed_of
runtime_depends=$(depends_names "$runtime_deb")
allowed_of[tokenscope]="$runtime_depends"
echo "tokenscope Depends: $(dpkg-deb -f "$runtime_deb" Depends)"
if [ -f "$cuda_deb" ]; then
  cuda_depends=$(depends_names "$cuda_deb")
  echo "tokenscope-cuda Depends: $(dpkg-deb -f "$cuda_deb" Depends)"
  check "tokenscope-cuda depends on tokenscope (= $version)" \
    grep -q "tokenscope (= $version)" <(dpkg-deb -f "$cuda_deb" Depends)
  # tokenscope-cuda depends on tokenscope exactly, so tokenscope's dependencies hold too.
  allowed_of[tokenscope-cuda]=$(printf '%s\n%s\n' "$cuda_depends" "$runtime_depends" | sort -u)
fi

check_library_owner() {  # check_library_owner PACKAGE WHO SONAME PATH
  local package=$1 who=$2 soname=$3 path=$4 owner
  case "$path" in "$root"/*) pass; return ;; esac  # shipped in our own packages
  if ! owner=$(owner_of "$path"); then
    case "$soname" in
      libcublas.so.* | libcublasLt.so.*)
        # Not from dpkg on this machine (NVIDIA's tarball); NVIDIA's apt package provides it.
        owner=$(grep -m1 '^libcublas-' <<<"${allowed_of[$package]}") ||
          { fail "$who needs $soname but ${package} declares no libcublas-* package"; return; }
        ;;
      *) fail "$who needs $soname ($path), which no dpkg package provides"; return ;;
    esac
  fi
  # The owner, or a name it Provides (libspdlog1.10 provides libspdlog1.10-fmt9, the name
  # dpkg-shlibdeps writes), must be in Depends.
  local names
  names=$(printf '%s\n' "$owner"; dpkg-query -W -f='${Provides}' "$owner" 2>/dev/null |
    tr ',' '\n' | sed -e 's/(.*)//' -e 's/:.*//' -e 's/[[:space:]]//g')
  if grep -qxF -f <(grep -v '^$' <<<"$names") <<<"${allowed_of[$package]}"; then
    pass
  else
    fail "$who needs $soname from package $owner, which ${package}'s Depends does not name"
  fi
}

for deb in "${debs[@]}"; do
  package=$(dpkg-deb -f "$deb" Package)
  while IFS= read -r member; do
    file="$root/${member#./}"
    [ -f "$file" ] && [ ! -L "$file" ] && is_elf "$file" || continue
    who="${member#.}"
    ldd_out=$(env -u LD_LIBRARY_PATH ldd "$file" 2>&1)
    if grep -q "not found" <<<"$ldd_out"; then
      fail "$who: ldd cannot resolve $(grep 'not found' <<<"$ldd_out" | awk '{print $1}' | tr '\n' ' ')"
      continue
    fi
    pass
    # Direct needs (NEEDED) against Depends; the rest is brought by those packages.
    while IFS= read -r soname; do
      # "libfoo.so.1 => /path (addr)", or for the dynamic loader "/lib64/ld-linux-x86-64.so.2 (addr)".
      path=$(awk -v s="$soname" '$1 == s && $2 == "=>" {print $3; exit}
                                 $1 ~ "/" s "$" {print $1; exit}' <<<"$ldd_out")
      if [ -z "$path" ]; then
        fail "$who: $soname not in ldd's answer"
        continue
      fi
      check_library_owner "$package" "$who" "$soname" "$path"
    done < <(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    echo "  $who: $(readelf -d "$file" | grep -c '(NEEDED)') direct libraries, $(grep -c '=>' <<<"$ldd_out") in all, resolved"
  done < <(dpkg-deb --fsys-tarfile "$deb" | tar -t)
done

# Plugins Qt loads by file name at run time: no NEEDED entry shows them.
qt_plugins="/usr/lib/$multiarch/qt6/plugins"
for plugin in sqldrivers/libqsqlite.so platforms/libqxcb.so; do
  check_library_owner tokenscope "tokenscope (Qt plugin)" "$plugin" "$qt_plugins/$plugin"
done

# --- 4. run the unpacked programs ----------------------------------------------------------
# A private HOME: QSettings, the conversation store and the model folder stay in $work.
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config" XDG_DATA_HOME="$work/home/.local/share"
export XDG_RUNTIME_DIR="$work/runtime" QT_QPA_PLATFORM=offscreen
mkdir -p "$HOME" "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
unset TOKENSCOPE_CUDA_PLUGIN TOKENSCOPE_MODELS

out=$("$root/usr/bin/tokenscope-cli" --version 2>&1)
echo "usr/bin/tokenscope-cli --version: $out"
check "tokenscope-cli --version prints $version" grep -qF "$version" <<<"$out"
out=$("$root/usr/bin/tokenscope" --version 2>&1)
echo "usr/bin/tokenscope --version: $out"
check "tokenscope --version prints $version" grep -qF "$version" <<<"$out"

if [ -f "$cuda_deb" ]; then
  out=$("$root/usr/bin/tokenscope-cli" devices 2>&1)
  echo "usr/bin/tokenscope-cli devices:"
  sed 's/^/  /' <<<"$out"
  check "tokenscope-cli devices names the plugin beside it in usr/lib/tokenscope" \
    grep -qF "$root/usr/lib/tokenscope/libtokenscope_cuda.so" <<<"$out"
fi

model="$work/tiny.gguf"
check "tokenscope-cli make-model writes a tiny model" \
  "$root/usr/bin/tokenscope-cli" make-model --out "$model" --type f16 --width 64 --layers 2 \
  --heads 4 --kv-heads 2 --ffn 128 --vocab 512
shot="$work/screenshot.png"
start=$(date +%s)
timeout 240 "$root/usr/bin/tokenscope" --model "$model" --store "$work/conversations.sqlite" \
  --screenshot "$shot" --prompt "Hello" >"$work/app.log" 2>&1
status=$?
if [ $status -ne 0 ]; then
  fail "tokenscope --screenshot exited with $status"
  sed 's/^/      /' "$work/app.log" | tail -20
fi
if [ -s "$shot" ]; then
  size=$(stat -c %s "$shot")
  dims=$(file -b "$shot" | grep -o '[0-9]* x [0-9]*' || true)
  echo "screenshot: $size bytes, ${dims:-unknown size}, $(($(date +%s) - start)) s"
  check "the screenshot is a PNG" grep -q "PNG image data" <(file -b "$shot")
  check "the screenshot is not trivial (> 20000 bytes)" test "$size" -gt 20000
  w=${dims%% x*}
  h=${dims##*x }
  check "the screenshot shows the 1500x950 window (got ${dims:-nothing})" test "${w:-0}" -ge 1000 -a "${h:-0}" -ge 600
else
  fail "no screenshot written"
fi

# --- 5. the portable archive ---------------------------------------------------------------
mkdir -p "$work/tgz"
tar -xzf "$tgz" -C "$work/tgz" || fail "tar -xzf $tgz"
folder="$work/tgz/tokenscope-${version}-Linux-${cpu}"
check "the archive unpacks into tokenscope-${version}-Linux-${cpu}/" test -x "$folder/bin/tokenscope-cli"
check "the archive contains bin/tokenscope" test -x "$folder/bin/tokenscope"
if [ -x "$folder/bin/tokenscope-cli" ]; then
  out=$(cd "$work" && "$folder/bin/tokenscope-cli" --version 2>&1)
  echo "tar.gz bin/tokenscope-cli --version: $out"
  check "tar.gz tokenscope-cli --version prints $version" grep -qF "$version" <<<"$out"
  if [ -f "$cuda_deb" ]; then
    check "the archive contains lib/tokenscope/libtokenscope_cuda.so" test -s "$folder/lib/tokenscope/libtokenscope_cuda.so"
    check "tar.gz tokenscope-cli devices names the plugin in its own folder" \
      grep -qF "$folder/lib/tokenscope/libtokenscope_cuda.so" <(cd "$work" && "$folder/bin/tokenscope-cli" devices 2>&1)
  fi
fi

# The bundle (cmake/TokenscopeLinuxBundle.cmake): Qt, ICU, spdlog, fmt and sentencepiece come
# from the archive's own lib/ and plugins/, never from the system, and the app works from there.
if [ -f "$folder/bin/qt.conf" ]; then
  check "the .deb carries no bundled Qt (the bundle is for the archive only)" \
    bash -c "! dpkg-deb -c '$runtime_deb' | grep -q 'libQt6Core'"
  check "the archive bundles libQt6Core" test -e "$folder/lib/libQt6Core.so.6"
  loads="$work/bundle-loads.txt"
  (cd "$work" && LD_DEBUG=files QT_QPA_PLATFORM=offscreen timeout 240 "$folder/bin/tokenscope" --model "$model" \
    --store "$work/bundle.sqlite" --screenshot "$work/bundle.png" --prompt "Hello" >"$work/bundle-app.log" 2>"$loads")
  check "the app from the archive saved a screenshot" test -s "$work/bundle.png"
  inits=$(grep -oE 'calling init: [^ ]+' "$loads" | sed 's/calling init: //' | sort -u)
  bundled=$(grep -E '/lib(Qt6|icu|spdlog|fmt|sentencepiece)[^/]*$|/libqoffscreen|/libqsqlite' <<<"$inits" || true)
  foreign=$(grep -vF "$folder/" <<<"$bundled" || true)
  echo "tar.gz app: $(grep -c . <<<"$bundled") bundled libraries and plugins loaded, $(grep -c . <<<"$foreign") from outside the folder"
  check "Qt/ICU/spdlog/fmt/sentencepiece and the platform and SQL plugins load from the archive" test -z "$foreign"
  check "the SQLite driver came from the archive's plugins/" grep -qF "$folder/plugins/sqldrivers/libqsqlite.so" <<<"$inits"
  [ -z "$foreign" ] || sed 's/^/      loaded from outside: /' <<<"$foreign"
fi

# --- 6. a real installation, only when asked -----------------------------------------------
apt_result="not run (set TOKENSCOPE_TEST_APT=1 as root on a machine you may change)"
if [ "${TOKENSCOPE_TEST_APT:-0}" = 1 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    fail "TOKENSCOPE_TEST_APT=1 needs root"
  elif dpkg-query -W -f='${Status}' tokenscope 2>/dev/null | grep -q 'install ok installed'; then
    fail "tokenscope is already installed here; the apt test would remove it"
  else
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$runtime_deb" >"$work/apt.log" 2>&1; then
      out=$(/usr/bin/tokenscope-cli --version 2>&1)
      check "installed /usr/bin/tokenscope-cli --version prints $version" grep -qF "$version" <<<"$out"
      check "dpkg -L tokenscope lists the desktop entry" grep -q "$app_id.desktop" <(dpkg -L tokenscope)
      apt_result="apt-get install ./${runtime_deb##*/}: $out; purged again"
    else
      fail "apt-get install $runtime_deb"
      sed 's/^/      /' "$work/apt.log" | tail -10
    fi
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq tokenscope >>"$work/apt.log" 2>&1 || true
  fi
fi
echo "apt install: $apt_result"

if [ $failures -ne 0 ]; then
  echo "install test: FAILED ($failures of $((checks + failures)) checks)"
  exit 1
fi
echo "install test: passed ($checks checks)"
