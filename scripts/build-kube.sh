#!/usr/bin/env bash
# Builds kube-apiserver, kube-scheduler and kube-controller-manager v1.20.2 from Debian's `kubernetes` source
# package, with Debian's Go: kube-apiserver for the tests that run a real API server (scorer/bench/controlplane.py,
# tests/kubekit.py), kube-scheduler for the end-to-end bench's side-by-side points and its smoke test
# (scorer/bench/e2e.py), kube-controller-manager for the volume tests, which run only its PersistentVolume binder
# controller (`--controllers=persistentvolume-binder`, tests/kubekit.py).
# Also installs etcd-server and openssl.
#
# The binaries go to a cache outside the repository, ${SCORER_KUBE_CACHE:-$HOME/.cache/scorer/kube-1.20.2}/bin,
# and each binary's build is skipped when it is there already. Needs root (apt-get); about 4 minutes on 2 cores
# the first time (both binaries come from one `make`: kube-scheduler adds little to it; built alone, with
# kube-apiserver already cached, it took 6.5 CPU-minutes), and ~2 GB of scratch space under the cache
# (removed after the build). Recipe and caveats: ../shared/reference/kubernetes-api-client.md §3.2.
#
# Usage: bash scripts/build-kube.sh   # prints the bin directory on its last line
set -euo pipefail

CACHE="${SCORER_KUBE_CACHE:-$HOME/.cache/scorer/kube-1.20.2}"
BIN="$CACHE/bin"
say() { echo "build-kube.sh: $*" >&2; }

if [ $# -gt 0 ]; then
    say "unknown argument '$1' (usage: build-kube.sh)"
    exit 2
fi
targets=(kube-apiserver kube-scheduler kube-controller-manager)
missing=()
for target in "${targets[@]}"; do
    [ -x "$BIN/$target" ] || missing+=("$target")
done

if [ ${#missing[@]} -eq 0 ] && command -v etcd >/dev/null 2>&1 && command -v openssl >/dev/null 2>&1; then
    echo "$BIN"
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "${missing[*]:-etcd or openssl} not installed in $BIN or on PATH and this is not root with apt-get: cannot build it"
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
say "installing golang-go, etcd-server, openssl and the build tools (apt-get)"
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends golang-go etcd-server openssl rsync jq make patch \
    golang-github-modern-go-reflect2-dev ca-certificates >/dev/null

if [ ${#missing[@]} -gt 0 ]; then
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
    what="${missing[*]/#/cmd/}"
    say "building ${missing[*]} (make WHAT=\"$what\"; a few minutes)"
    (cd "$src" && HOME="$work/home" GOPROXY=off CGO_ENABLED=0 GOLDFLAGS="-s -w" \
        make WHAT="$what" >"$work/build.log" 2>&1) || { tail -30 "$work/build.log" >&2; exit 1; }
    for target in "${missing[@]}"; do
        cp "$src/_output/bin/$target" "$BIN/$target.tmp"
        mv "$BIN/$target.tmp" "$BIN/$target"
    done
    chmod -R u+w "$work" 2>/dev/null || true
    rm -rf "$work"
fi
for target in "${targets[@]}"; do
    say "ready: $BIN/$target ($("$BIN/$target" --version 2>/dev/null || echo '?'))"
done
echo "$BIN"
