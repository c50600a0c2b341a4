#!/usr/bin/env bash
# Everything the build, the tests and the local engine need, installed where it is missing:
#
#   - llama.cpp's build tools: cmake, libclang (bindgen) and a C++ compiler, from the system's
#     package manager (apt-get as root or through sudo; Homebrew on macOS; elsewhere it names
#     the packages to install);
#   - PostgreSQL's server binaries (initdb, postgres, pg_ctl) for the tests' private clusters:
#     only the binaries, no server is started (on Debian the install's own `main` cluster is
#     kept from starting and removed again);
#   - cargo-nextest, the test runner (`cargo install --locked cargo-nextest`);
#   - the default local model (scripts/fetch-model.sh).
#
# Idempotent; when everything is there it only looks (well under a second).
#
#   scripts/setup.sh            install what is missing
#   scripts/setup.sh --check    report what is present and what is missing, change nothing;
#                               exit 0 if everything is present, 1 if not
set -euo pipefail
cd "$(dirname "$0")/.."

check=false
case "${1:-}" in
  "") ;;
  --check) check=true ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac

say() { echo "setup: $*" >&2; }
os="$(uname -s)"

# --- what is there ------------------------------------------------------------------------
# Each check sets `where` to what it found.
where=""
have_cmake() { where="$(command -v cmake)"; }
have_cxx() {
  local c
  for c in c++ g++ clang++; do
    if where="$(command -v "$c")"; then return 0; fi
  done
  return 1
}
have_libclang() {
  # bindgen needs libclang and clang's own headers: on Debian, libclang-dev brings both (the
  # runtime library alone, libclang1-*, does not).
  if command -v dpkg-query >/dev/null 2>&1; then
    [[ "$(dpkg-query -W -f '${db:Status-Status}' libclang-dev 2>/dev/null)" == installed ]] &&
      where="libclang-dev (dpkg)"
    return
  fi
  local f
  for f in ${LIBCLANG_PATH:+"$LIBCLANG_PATH"/libclang.*} /usr/lib/llvm-*/lib/libclang.so \
    /usr/lib64/libclang.so /usr/lib/libclang.so \
    /Library/Developer/CommandLineTools/usr/lib/libclang.dylib \
    /Applications/Xcode.app/Contents/Developer/Toolchains/XcodeDefault.xctoolchain/usr/lib/libclang.dylib \
    /opt/homebrew/opt/llvm/lib/libclang.dylib /usr/local/opt/llvm/lib/libclang.dylib; do
    if [[ -e "$f" ]]; then
      where="$f"
      return 0
    fi
  done
  return 1
}
have_postgres() { where="$(bash crates/testpg/pg-cluster.sh bindir 2>/dev/null)"; }
have_cargo() { where="$(command -v cargo)"; }
have_nextest() {
  # cargo finds its subcommands on PATH and in $CARGO_HOME/bin.
  where="$(command -v cargo-nextest || ls "${CARGO_HOME:-$HOME/.cargo}/bin/cargo-nextest" 2>/dev/null)"
}
have_model() { where="$(scripts/fetch-model.sh --check 2>&1 | sed "s/^fetch-model: //")"; }

# Package names for apt-get and Homebrew, and what each item is for.
apt_pkg() {
  case "$1" in
    cmake) echo cmake ;;
    libclang) echo libclang-dev ;;
    cxx) echo g++ ;;
    postgres) echo postgresql ;;
  esac
}
brew_pkg() {
  case "$1" in
    cmake) echo cmake ;;
    libclang | cxx) echo llvm ;;
    postgres) echo postgresql@17 ;;
  esac
}
label() {
  case "$1" in
    cmake) echo "cmake (llama.cpp's build)" ;;
    libclang) echo "libclang (bindgen, for llama.cpp)" ;;
    cxx) echo "C++ compiler (llama.cpp)" ;;
    postgres) echo "PostgreSQL server binaries (the tests' private clusters)" ;;
    cargo) echo "cargo (the Rust toolchain)" ;;
    nextest) echo "cargo-nextest (the test runner)" ;;
    model) echo "the default local model" ;;
  esac
}
order=(cmake libclang cxx postgres cargo nextest model)

missing=()
report() {
  local item
  missing=()
  for item in "${order[@]}"; do
    where=""
    if "have_$item"; then
      $check && say "present  $(label "$item"): $where"
    else
      missing+=("$item")
      $check && say "MISSING  $(label "$item")${where:+: $where}"
    fi
  done
  return 0
}
report

if $check; then
  if [[ ${#missing[@]} -eq 0 ]]; then
    say "everything is present"
    exit 0
  fi
  say "${#missing[@]} missing: ${missing[*]} (scripts/setup.sh installs them)"
  exit 1
fi

is_missing() { [[ " ${missing[*]:-} " == *" $1 "* ]]; }

# --- system packages ----------------------------------------------------------------------
system=()
for item in cmake libclang cxx postgres; do
  is_missing "$item" && system+=("$item")
done

# Root, or sudo when there is one.
as_root() {
  if [[ "$(id -u)" == 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    say "needs root for: $*"
    return 1
  fi
}

apt_install() {
  local pkgs=("$@") before="" policy=""
  say "installing with apt-get: ${pkgs[*]}"
  as_root apt-get update -qq
  if [[ " ${pkgs[*]} " == *" postgresql "* ]]; then
    # Debian's postgresql packages create a `main` cluster and start it. The tests need only the
    # binaries: a policy-rc.d that refuses every start keeps the install from starting a server,
    # and the clusters the install created are removed after it.
    before="$(ls -d /etc/postgresql/*/* 2>/dev/null || true)"
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
      policy=/usr/sbin/policy-rc.d
      printf '#!/bin/sh\n# scripts/setup.sh: no service starts while it installs PostgreSQL\nexit 101\n' |
        as_root tee "$policy" >/dev/null
      as_root chmod 755 "$policy"
      trap 'as_root rm -f /usr/sbin/policy-rc.d' EXIT
    fi
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${pkgs[@]}" >/dev/null
  if [[ -n "$policy" ]]; then
    as_root rm -f "$policy"
    trap - EXIT
  fi
  if [[ " ${pkgs[*]} " == *" postgresql "* ]] && command -v pg_dropcluster >/dev/null 2>&1; then
    local conf version name
    for conf in $(ls -d /etc/postgresql/*/* 2>/dev/null || true); do
      [[ $'\n'"$before"$'\n' == *$'\n'"$conf"$'\n'* ]] && continue
      version="$(basename "$(dirname "$conf")")"
      name="$(basename "$conf")"
      say "removing the cluster $version/$name that the postgresql package created (the tests start their own)"
      as_root pg_dropcluster --stop "$version" "$name"
    done
  fi
}

if [[ ${#system[@]} -gt 0 ]]; then
  if command -v apt-get >/dev/null 2>&1; then
    pkgs=()
    for item in ${system[@]+"${system[@]}"}; do pkgs+=("$(apt_pkg "$item")"); done
    apt_install "${pkgs[@]}"
  elif [[ "$os" == Darwin ]] && command -v brew >/dev/null 2>&1; then
    pkgs=()
    for item in ${system[@]+"${system[@]}"}; do
      pkg="$(brew_pkg "$item")"
      [[ " ${pkgs[*]:-} " == *" $pkg "* ]] || pkgs+=("$pkg")
    done
    say "installing with Homebrew: ${pkgs[*]} (keg-only formulae stay off PATH; the build and the tests find them)"
    brew install "${pkgs[@]}"
  else
    say "cannot install these here; install them with your package manager, then run scripts/setup.sh again:"
    for item in ${system[@]+"${system[@]}"}; do
      say "  $(label "$item"): Debian/Ubuntu $(apt_pkg "$item"), Homebrew $(brew_pkg "$item")"
    done
    exit 1
  fi
  for item in ${system[@]+"${system[@]}"}; do
    if ! "have_$item"; then
      say "$(label "$item") is still missing after the install"
      exit 1
    fi
    say "installed $(label "$item"): $where"
  done
else
  say "build tools and PostgreSQL binaries are installed"
fi

# --- the test runner ----------------------------------------------------------------------
if is_missing cargo; then
  say "cargo is missing: install Rust (stable, 1.90 or newer) with rustup, then run scripts/setup.sh again"
  exit 1
fi
if is_missing nextest; then
  say "installing cargo-nextest (cargo install --locked cargo-nextest; it compiles for a few minutes)"
  cargo install --locked cargo-nextest
else
  say "cargo-nextest is installed"
fi

# --- the model ----------------------------------------------------------------------------
scripts/fetch-model.sh
