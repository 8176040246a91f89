#!/bin/bash
# Install what the local stack needs (Debian packages), build kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet and kube-proxy v1.20.2 from Debian's
# `kubernetes` source package (kube-scheduler is the tests' oracle for the Kubernetes rules our
# scheduler re-implements; kubelet and kube-proxy run the Nodes of `local up --kubelet`),
# and build Slurm 24.11.5 (the default Slurm of the local stack) from the upstream tarball
# Debian's next release serves; Debian 12's own Slurm 22.05 packages stay installed for
# `--slurm 22.05`.
#
# Idempotent: a second run only checks (dpkg status, cached binaries' --version) and takes seconds.
# Run as root. The build happens in a temp dir outside the checkout, which is removed afterwards;
# the kube binaries are cached under ${XDG_CACHE_HOME:-$HOME/.cache}/sunk-reconciler/kubernetes/<version>/.
#
# Slurm is installed into /opt/sunk-reconciler/slurm/<version> (not under ~/.cache: slurmrestd
# runs as the system user sunk-slurmrestd, which this script adds, and must read its libraries
# and plugins there).
#
# Env: KUBE_VERSION (v1.20.2)  SUNK_RECONCILER_CACHE (overrides the cache root)
#      SETUP_KEEP_BUILD=1 (keep the temp build dirs, for debugging)
# SUNK_RECONCILER_SLURM_PREFIX is not read here: it points the local stack at another Slurm
# install (docs/local-stack.md), which this script must never build over.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.20.2}
CACHE_ROOT=${SUNK_RECONCILER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/sunk-reconciler}
KUBE_BIN_DIR=$CACHE_ROOT/kubernetes/$KUBE_VERSION
# kubelet and kube-proxy: `local up --kubelet` (real Nodes on containerd, docs/local-stack.md).
KUBE_TARGETS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
BUILD_TARGETS=()
# Slurm 24.11 from Debian 13's source: the suite, the Debian revision whose orig tarball is served
# (its .dsc may not be), and that tarball's sha256 from the suite's Sources index.
SLURM_VERSION=24.11.5
SLURM_SUITE=trixie
SLURM_DEBIAN_VERSION=24.11.5-4+deb13u1
SLURM_TARBALL=slurm-wlm_${SLURM_VERSION}.orig.tar.gz
SLURM_SHA256=e1a5547edd212c38b5e3230a284133f777b32746551f094aaa81cc4af375e332
SLURM_PREFIX=/opt/sunk-reconciler/slurm/$SLURM_VERSION
# --enable-multiple-slurmd: the local stack runs one slurmd per node on this one host (as
# Debian's build allows); without it slurmctld keeps an address for the first node of a
# NodeHostname only, and the others go DOWN+NOT_RESPONDING.
# --disable-debug: no -ggdb3 debug info (an install of 144 MiB instead of 419 MiB).
SLURM_CONFIGURE=(--with-jwt --with-http-parser --with-yaml --with-json --with-munge
  --enable-slurmrestd --enable-multiple-slurmd --disable-debug --without-hdf5 --disable-x11)
APT=(apt-get -o DPkg::Lock::Timeout=600 -q)
export DEBIAN_FRONTEND=noninteractive

# Runtime daemons (slurm-wlm-emulator is deliberately absent: it takes over /usr/sbin/slurmctld
# and slurmd through update-alternatives) followed by the kube build's toolchain.
PACKAGES=(
  munge slurmctld slurmd slurmrestd slurm-client slurm-wlm-jwt-plugin
  etcd-server mariadb-server slurmdbd
  openssh-server openssh-client   # the login Pod's sshd, and ssh to reach it
  s6 execline                     # compute.s6: s6-svscan supervises longruns, execlineb runs up
  slapd sssd-ldap sssd-tools libnss-sss sudo   # `local up --directory`: LDAP, sssd, sudo
  # `local up --kubelet`: one containerd per kubelet (CRI plugin), runc, the CNI bridge,
  # host-local and loopback plugins, kube-proxy's iptables and conntrack, dnsmasq for cluster
  # DNS, and podman to make the pause image from the debootstrapped base.
  containerd runc containernetworking-plugins iptables conntrack dnsmasq-base
  podman debootstrap
  golang-go rsync make build-essential dpkg-dev golang-github-modern-go-reflect2-dev
  openssl curl ca-certificates gnupg
  python3 python3-venv            # the venv: Debian's python3 has no ensurepip without python3-venv
  libjwt-dev libhttp-parser-dev libjson-c-dev libyaml-dev libmunge-dev libmariadb-dev
  libdbus-1-dev liblz4-dev libcurl4-openssl-dev pkg-config
  liblua5.4-dev                   # Slurm's Lua plugins: slurmConfig.luaPlugins (job_submit, cli_filter)
)
# kubectl, to reach the stack `local up` prints (README): Debian's 1.20 client, unless the machine
# has a kubectl already (a newer one, whose kustomize deploy/ wants, must not be replaced).
command -v kubectl >/dev/null || PACKAGES+=(kubernetes-client)

SETUP_START=$(date +%s.%N)
WORK=""
SLURM_WORK=""
LOG=""
CURRENT_STEP=""
STEP_PID=""
OWN_POLICY_RC=0

say() { printf 'setup: %s\n' "$*"; }

elapsed_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# Stop a step still running in the background (interrupted setup): the process and its
# descendants, by PID, deepest first.
kill_tree() {
  local pid=$1 child
  for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do kill_tree "$child"; done
  kill -TERM "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  if [ -n "$STEP_PID" ] && kill -0 "$STEP_PID" 2>/dev/null; then
    kill_tree "$STEP_PID"
    wait "$STEP_PID" 2>/dev/null || true
  fi
  if [ "$OWN_POLICY_RC" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
  if [ -n "$WORK" ] && [ -d "$WORK" ] && [ "${SETUP_KEEP_BUILD:-0}" != 1 ]; then
    # Go's module cache is read-only; make it removable first.
    chmod -R u+w "$WORK" 2>/dev/null || true
    rm -rf "$WORK"
  fi
  if [ -n "$SLURM_WORK" ] && [ -d "$SLURM_WORK" ] && [ "${SETUP_KEEP_BUILD:-0}" != 1 ]; then
    rm -rf "$SLURM_WORK"
  fi
  if [ "$rc" -ne 0 ] && [ -n "$CURRENT_STEP" ]; then
    say "step '$CURRENT_STEP' failed (exit $rc)"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# step NAME CMD...: run CMD with its output in $LOG; on failure name the step and show the log tail.
step() {
  local name=$1; shift
  CURRENT_STEP=$name
  local t0; t0=$(date +%s.%N)
  say "step '$name' ..."
  local rc=0
  # In the background rather than `"$@" || rc=$?`: bash ignores `set -e` inside anything run
  # on the left of `||`, so a failing command in the middle of a step would go unnoticed.
  "$@" >>"$LOG" 2>&1 &
  STEP_PID=$!
  wait "$STEP_PID" || rc=$?
  STEP_PID=""
  if [ "$rc" -ne 0 ]; then
    echo "setup: step '$name' failed: exit $rc; last lines of $LOG:" >&2
    tail -n 25 "$LOG" | sed 's/^/  | /' >&2
    CURRENT_STEP=""
    exit "$rc"
  fi
  say "step '$name' ok ($(elapsed_since "$t0") s)"
  CURRENT_STEP=""
}

fail() { echo "setup: $*" >&2; exit 1; }

missing_packages() {
  local p status
  for p in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [ "$status" = "install ok installed" ] || echo "$p"
  done
}

# Package postinst scripts would otherwise start munged, slurmctld, etcd and mariadb as system
# services on their default ports; the local stack runs its own private copies instead.
block_service_starts() {
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    OWN_POLICY_RC=1
  fi
}

install_packages() {
  local missing
  missing=$(missing_packages | tr '\n' ' ')
  if [ -z "${missing// /}" ]; then
    say "packages: all ${#PACKAGES[@]} installed, skipping apt-get"
    return
  fi
  say "packages missing: $missing"
  block_service_starts
  step "apt-get update" "${APT[@]}" update
  # libnss-sss's postinst adds `sss` to the host's /etc/nsswitch.conf: the local stack's
  # Pods get their own (reconciler/local/agent/pod_namespace.py); the host's stays as it was.
  local nsswitch; nsswitch=$(mktemp)
  cp -p /etc/nsswitch.conf "$nsswitch"
  # shellcheck disable=SC2086  # word splitting of the package list is intended
  step "apt-get install" "${APT[@]}" install -y --no-install-recommends $missing
  cp -p "$nsswitch" /etc/nsswitch.conf && rm -f "$nsswitch"
  missing=$(missing_packages | tr '\n' ' ')
  [ -z "${missing// /}" ] || fail "step 'apt-get install' left packages missing: $missing"
}

# The targets whose cached binary is missing or reports another version: only those are built
# (a cache from before kube-scheduler was added gets just that one).
missing_targets() {
  local t out
  for t in "${KUBE_TARGETS[@]}"; do
    out=$("$KUBE_BIN_DIR/$t" --version 2>/dev/null) || { echo "$t"; continue; }
    [ "$out" = "Kubernetes $KUBE_VERSION" ] || echo "$t"
  done
}

# deb-src twins of the Debian archive entries apt already uses (same hosts, suites, keys): no
# new hosts, and it follows whatever mirror the machine is configured with.
debian_src_entries() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # deb822: copy each enabled `Types: deb` stanza whose URIs name a Debian archive.
    awk 'BEGIN { enabled = 1 }
         function flush() {
           if (stanza != "" && deb && debian && enabled) { printf "%s\n", stanza }
           stanza = ""; deb = 0; debian = 0; enabled = 1 }
         /^[[:space:]]*$/ { flush(); next }
         /^#/ { next }
         /^Types:/ { if ($0 ~ /[[:space:]]deb([[:space:]]|$)/) deb = 1; $0 = "Types: deb-src" }
         /^URIs:/ { if ($0 ~ /debian/) debian = 1 }
         /^Enabled:[[:space:]]*no/ { enabled = 0 }
         { stanza = stanza $0 "\n" }
         END { flush() }' "$f"
  done
  # one-line format: `deb [opts] URI suite components` -> `deb-src ...`
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '$1 == "deb" && /debian/ { $1 = "deb-src"; print }' "$f"
  done
}

ensure_deb_src() {
  local f=/etc/apt/sources.list.d/sunk-reconciler-src.sources
  local legacy=/etc/apt/sources.list.d/sunk-reconciler-src.list
  if apt-cache showsrc kubernetes 2>/dev/null | grep -q '^Package: kubernetes'; then
    return
  fi
  if [ ! -f "$f" ] && [ ! -f "$legacy" ]; then
    local entries
    entries=$(debian_src_entries)
    [ -n "$entries" ] || fail "step 'deb-src': no Debian archive entry found in /etc/apt to derive deb-src from"
    if grep -q '^deb-src ' <<<"$entries"; then
      { echo "# Added by tools/setup.sh (to build kube-apiserver)"
        grep '^deb-src ' <<<"$entries"; } >"$legacy"
    fi
    if grep -q '^Types: deb-src' <<<"$entries"; then
      { echo "# Added by tools/setup.sh (to build kube-apiserver)"
        grep -v '^deb-src ' <<<"$entries"; } >"$f"
    fi
  fi
  step "apt-get update (deb-src)" "${APT[@]}" update
}

fetch_source() {
  cd "$WORK/src"
  # Debian 12's 1.20 by version: once the trixie deb-src entry for Slurm exists (a second run,
  # or a cleared kube cache), plain `apt-get source kubernetes` would take trixie's 1.32.
  local version
  version=$(apt-cache showsrc kubernetes | awk '/^Version: 1\.20\./ {print $2}' | sort -V | tail -1)
  [ -n "$version" ] || { echo "no kubernetes 1.20 source package in apt's deb-src entries"; return 1; }
  "${APT[@]}" source "kubernetes=$version"
  local dir
  dir=$(find . -maxdepth 1 -type d -name 'kubernetes-1.20*' | head -1)
  [ -n "$dir" ] || { echo "no kubernetes-1.20* directory after apt-get source"; return 1; }
  ln -sfn "$WORK/src/${dir#./}" "$WORK/kubernetes"
}

# Vendored modern-go/reflect2 1.0.1 crashes under Go >= 1.18 ("fatal error: fault" in
# mapiterinit, on the first CRD); Debian ships a fixed copy.
replace_reflect2() {
  local vendored=$WORK/kubernetes/vendor/github.com/modern-go/reflect2
  local debian=/usr/share/gocode/src/github.com/modern-go/reflect2
  [ -d "$debian" ] || { echo "missing $debian (golang-github-modern-go-reflect2-dev)"; return 1; }
  rm -rf "$vendored"
  cp -a "$debian" "$vendored"
  rm -f "$vendored/go.mod"
}

# The source tarball does not ship the generated OpenAPI definitions.
gen_openapi() {
  cd "$WORK/kubernetes"
  env -u GOPATH GOCACHE="$WORK/gocache" HOME="$WORK" make gen_openapi
}

# GOPATH mode, as upstream 1.20's hack/lib/init.sh does (module mode fails with
# "updates to go.mod needed, disabled by -mod=vendor").
go_build() {
  export GOPATH=$WORK/gopath GOCACHE=$WORK/gocache GO111MODULE=off HOME=$WORK
  mkdir -p "$GOPATH/src/k8s.io" "$WORK/bin"
  ln -sfn "$(readlink -f "$WORK/kubernetes")" "$GOPATH/src/k8s.io/kubernetes"
  cd "$GOPATH/src/k8s.io/kubernetes"
  local ld="" p minor=${KUBE_VERSION#v1.}
  minor=${minor%%.*}
  for p in k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version \
           k8s.io/kubernetes/vendor/k8s.io/component-base/version; do
    ld="$ld -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld="$ld -X $p.gitTreeState=clean -X $p.gitCommit=debian-$KUBE_VERSION"
  done
  local t
  for t in "${BUILD_TARGETS[@]}"; do
    echo "building $t"
    go build -ldflags "-s -w $ld" -o "$WORK/bin/$t" "./cmd/$t"
  done
}

# Install into the cache only once every binary reports the right version, so an interrupted
# build never leaves a half-filled cache that a later run would trust.
install_binaries() {
  local t out
  for t in "${BUILD_TARGETS[@]}"; do
    out=$("$WORK/bin/$t" --version)
    [ "$out" = "Kubernetes $KUBE_VERSION" ] || { echo "$t --version said '$out'"; return 1; }
  done
  mkdir -p "$KUBE_BIN_DIR"
  for t in "${BUILD_TARGETS[@]}"; do
    cp "$WORK/bin/$t" "$KUBE_BIN_DIR/.$t.new"
    mv -f "$KUBE_BIN_DIR/.$t.new" "$KUBE_BIN_DIR/$t"
  done
}

build_kube() {
  mapfile -t BUILD_TARGETS < <(missing_targets)
  if [ "${#BUILD_TARGETS[@]}" -eq 0 ]; then
    say "kubernetes $KUBE_VERSION: cached binaries ok in $KUBE_BIN_DIR, skipping build"
    return
  fi
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/sunk-reconciler-kube-build.XXXXXX")
  mkdir -p "$WORK/src"
  mkdir -p "$WORK/tmp"
  # GOTMPDIR: keep go's scratch space inside $WORK so the cleanup trap removes it too.
  export GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS= GOTMPDIR=$WORK/tmp
  say "building kubernetes $KUBE_VERSION in $WORK (about 7 min on 2 cores, 1.4 GB memory, 2 GB disk)"
  ensure_deb_src
  step "apt-get source kubernetes" fetch_source
  step "replace vendored reflect2" replace_reflect2
  step "make gen_openapi" gen_openapi
  step "go build ${BUILD_TARGETS[*]}" go_build
  step "install binaries into $KUBE_BIN_DIR" install_binaries
}

# ---- Slurm 24.11 ---------------------------------------------------------------------------

# What a finished install records; a prefix without it (an interrupted build) is rebuilt.
# LUA_PLUGINS names what configure finds by itself (liblua5.4-dev): a build made before it was
# installed lacks them, so its stamp differs and it is rebuilt.
LUA_PLUGINS=(job_submit_lua.so cli_filter_lua.so)
slurm_stamp() {
  printf '%s %s %s %s\n' "$SLURM_VERSION" "$SLURM_SHA256" "${SLURM_CONFIGURE[*]}" "${LUA_PLUGINS[*]}"
}

cached_slurm_ok() {
  [ -f "$SLURM_PREFIX/.sunk-reconciler-build" ] || return 1
  [ "$(cat "$SLURM_PREFIX/.sunk-reconciler-build")" = "$(slurm_stamp)" ] || return 1
  local out
  out=$(LD_LIBRARY_PATH="$SLURM_PREFIX/lib" "$SLURM_PREFIX/sbin/slurmctld" -V 2>/dev/null) || return 1
  [ "$out" = "slurm $SLURM_VERSION" ] || return 1
  local plugin
  for plugin in "${LUA_PLUGINS[@]}"; do [ -f "$SLURM_PREFIX/lib/slurm/$plugin" ] || return 1; done
}

# A deb-src entry for $SLURM_SUITE, derived from the Debian archive entry apt already uses.
ensure_slurm_src() {
  local f=/etc/apt/sources.list.d/sunk-reconciler-slurm-src.sources
  if apt-cache showsrc slurm-wlm 2>/dev/null | grep -q "^Version: $SLURM_DEBIAN_VERSION\$"; then
    return
  fi
  local entries
  entries=$(debian_src_entries | awk -v suite="$SLURM_SUITE" '
    /^deb-src / { if (!done && $0 !~ /security/) { $3 = suite; print; done = 1 } next }
    /^URIs:/ { uris = $0; security = ($0 ~ /security/) }
    /^Signed-By:/ { signed = $0 }
    /^[[:space:]]*$/ { if (uris != "" && !security && !done) { emit() } uris = ""; signed = "" }
    function emit() { printf "Types: deb-src\n%s\nSuites: %s\nComponents: main\n%s\n", uris, suite, signed; done = 1 }
    END { if (uris != "" && !security && !done) emit() }')
  [ -n "$entries" ] || fail "step 'deb-src $SLURM_SUITE': no Debian archive entry found in /etc/apt"
  if grep -q '^deb-src ' <<<"$entries"; then
    { echo "# Added by tools/setup.sh (Slurm $SLURM_VERSION source)"; echo "$entries"; } \
      >/etc/apt/sources.list.d/sunk-reconciler-slurm-src.list
  else
    { echo "# Added by tools/setup.sh (Slurm $SLURM_VERSION source)"; echo "$entries"; } >"$f"
  fi
  step "apt-get update (deb-src $SLURM_SUITE)" "${APT[@]}" update
}

# apt-get source fails on the missing .dsc of that revision, but fetches the orig tarball first:
# the pinned checksum decides.
fetch_slurm_source() {
  cd "$SLURM_WORK"
  "${APT[@]}" source --download-only "slurm-wlm=$SLURM_DEBIAN_VERSION" || true
  [ -f "$SLURM_TARBALL" ] || { echo "apt-get source did not fetch $SLURM_TARBALL"; return 1; }
  echo "$SLURM_SHA256  $SLURM_TARBALL" | sha256sum -c -
  tar -xzf "$SLURM_TARBALL"
}

slurm_source_dir() { find "$SLURM_WORK" -maxdepth 1 -type d -name 'slurm-*' | head -1; }

configure_slurm() {
  cd "$(slurm_source_dir)"
  ./configure --prefix="$SLURM_PREFIX" --sysconfdir="$SLURM_PREFIX/etc" "${SLURM_CONFIGURE[@]}"
}

make_slurm() {
  cd "$(slurm_source_dir)"
  make -j"$(nproc)"
}

install_slurm() {
  cd "$(slurm_source_dir)"
  rm -rf "$SLURM_PREFIX"
  make install
  slurm_stamp >"$SLURM_PREFIX/.sunk-reconciler-build"
  cached_slurm_ok || {
    echo "installed Slurm does not answer slurmctld -V with $SLURM_VERSION, or lacks ${LUA_PLUGINS[*]}"
    return 1
  }
}

build_slurm() {
  if cached_slurm_ok; then
    say "slurm $SLURM_VERSION: installed in $SLURM_PREFIX, skipping build"
    return
  fi
  SLURM_WORK=$(mktemp -d "${TMPDIR:-/tmp}/sunk-reconciler-slurm-build.XXXXXX")
  say "building slurm $SLURM_VERSION into $SLURM_PREFIX (about 10 min on 2 cores)"
  ensure_slurm_src
  step "apt-get source slurm-wlm $SLURM_DEBIAN_VERSION (sha256 pinned)" fetch_slurm_source
  step "configure slurm" configure_slurm
  step "make slurm" make_slurm
  step "make install slurm into $SLURM_PREFIX" install_slurm
}

# The user the scheduler's tests and examples run Pods' jobs as (SUNK's "Schedule Kubernetes Pods
# with Slurm": "user-id: 1001", "a dedicated user in your Slurm environment for Kubernetes Pods").
POD_USER=sunk-pods
POD_UID=1001

ensure_pod_user() {
  if getent passwd "$POD_UID" >/dev/null; then
    say "user $POD_UID: exists ($(getent passwd "$POD_UID" | cut -d: -f1))"
    return
  fi
  # Primary group = uid: Slurm runs the job with it, and SUNK's group-id defaults to user-id.
  getent group "$POD_UID" >/dev/null || step "groupadd $POD_USER ($POD_UID)" \
    groupadd --gid "$POD_UID" "$POD_USER"
  step "useradd $POD_USER ($POD_UID)" useradd --uid "$POD_UID" --gid "$POD_UID" \
    --no-create-home --shell /usr/sbin/nologin "$POD_USER"
}

# slurmrestd refuses to run as root, as SlurmUser (the local stack's user) and, from Slurm 25.11
# on, as `nobody`; as root the local stack runs it as this user, in a group of its own.
REST_USER=sunk-slurmrestd

ensure_rest_user() {
  if getent passwd "$REST_USER" >/dev/null && getent group "$REST_USER" >/dev/null; then
    say "user $REST_USER: exists"
    return
  fi
  step "useradd --system $REST_USER" useradd --system --user-group --no-create-home \
    --home-dir /nonexistent --shell /usr/sbin/nologin "$REST_USER"
}

main() {
  [ "$(id -u)" = 0 ] || fail "must run as root (it installs Debian packages)"
  mkdir -p "$CACHE_ROOT"
  LOG=$CACHE_ROOT/setup.log
  : >"$LOG"
  say "log: $LOG"
  install_packages
  ensure_pod_user
  ensure_rest_user
  build_kube
  say "kube binaries: $KUBE_BIN_DIR"
  build_slurm
  say "slurm $SLURM_VERSION: $SLURM_PREFIX"
  say "done in $(elapsed_since "$SETUP_START") s"
}

main "$@"
