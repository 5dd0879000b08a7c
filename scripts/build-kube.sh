#!/usr/bin/env bash
# Builds kube-apiserver v1.20.2 from Debian's `kubernetes` source package, with Debian's Go, for the
# tests that run a real API server (tests/kubekit.py). Also installs etcd-server and openssl.
#
# The binaries go to a cache outside the repository, ${SCORER_KUBE_CACHE:-$HOME/.cache/scorer/kube-1.20.2}/bin,
# and the build is skipped when they are there already. Needs root (apt-get); about 4 minutes on 2 cores
# the first time, and ~2 GB of scratch space under the cache (removed after the build).
# Recipe and caveats: ../shared/reference/kubernetes-api-client.md §3.2.
#
# Usage: bash scripts/build-kube.sh            # prints the bin directory on its last line
set -euo pipefail

CACHE="${SCORER_KUBE_CACHE:-$HOME/.cache/scorer/kube-1.20.2}"
BIN="$CACHE/bin"
say() { echo "build-kube.sh: $*" >&2; }

if [ -x "$BIN/kube-apiserver" ] && command -v etcd >/dev/null 2>&1 && command -v openssl >/dev/null 2>&1; then
    echo "$BIN"
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "kube-apiserver is not built in $BIN and this is not root with apt-get: cannot build it"
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
say "installing golang-go, etcd-server, openssl and the build tools (apt-get)"
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends golang-go etcd-server openssl rsync jq make patch \
    golang-github-modern-go-reflect2-dev ca-certificates >/dev/null

if [ ! -x "$BIN/kube-apiserver" ]; then
    work="$CACHE/work"
    rm -rf "$work"
    mkdir -p "$work/apt/lists/partial" "$work/apt/sources.list.d" "$BIN"
    # deb-src through a private apt configuration, so the system's sources stay untouched.
    : > "$work/apt/sources.list"
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -e "$f" ] && sed 's/^Types: deb$/Types: deb-src/' "$f" > "$work/apt/sources.list.d/$(basename "$f")"
    done
    if [ -f /etc/apt/sources.list ]; then
        sed -n 's/^deb /deb-src /p' /etc/apt/sources.list > "$work/apt/sources.list"
    fi
    apt_src=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o "Dir::Etc::SourceParts=$work/apt/sources.list.d"
             -o "Dir::State::Lists=$work/apt/lists" -o "APT::Sandbox::User=root")
    say "downloading Debian's kubernetes source package"
    apt-get "${apt_src[@]}" update -qq >/dev/null
    (cd "$work" && apt-get "${apt_src[@]}" source --download-only kubernetes >/dev/null)
    orig=$(ls "$work"/kubernetes_*.orig.tar.gz | head -1)
    debian=$(ls "$work"/kubernetes_*.debian.tar.* | head -1)
    say "extracting $(basename "$orig")"
    tar -xzf "$orig" -C "$work"
    src=$(find "$work" -maxdepth 1 -type d -name 'kubernetes-*' | head -1)
    tar -xf "$debian" -C "$src"
    if [ -f "$src/debian/patches/series" ]; then
        while read -r patch; do
            case "$patch" in ''|'#'*) continue ;; esac
            patch -d "$src" -p1 -s < "$src/debian/patches/$patch"
        done < "$src/debian/patches/series"
    fi
    # The vendored modern-go/reflect2 1.0.1 breaks on Go >= 1.18: Debian's 1.0.2 instead.
    rm -rf "$src/vendor/github.com/modern-go/reflect2"
    cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 "$src/vendor/github.com/modern-go/reflect2"
    say "building kube-apiserver (make WHAT=cmd/kube-apiserver; a few minutes)"
    (cd "$src" && HOME="$work/home" GOPROXY=off CGO_ENABLED=0 GOLDFLAGS="-s -w" \
        make WHAT=cmd/kube-apiserver >"$work/build.log" 2>&1) || { tail -30 "$work/build.log" >&2; exit 1; }
    cp "$src/_output/bin/kube-apiserver" "$BIN/kube-apiserver.tmp"
    mv "$BIN/kube-apiserver.tmp" "$BIN/kube-apiserver"
    chmod -R u+w "$work" 2>/dev/null || true
    rm -rf "$work"
fi
say "built $BIN/kube-apiserver ($("$BIN/kube-apiserver" --version 2>/dev/null || echo '?'))"
echo "$BIN"
