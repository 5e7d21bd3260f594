#!/usr/bin/env bash
# Checks that C++ files are formatted as .clang-format says; exits 1 naming those that are not
# (with the changes clang-format would make), 0 when all are. `make format` applies the format.
#
# Usage: scripts/check-format.sh [FILE...]
#   With no FILE: every tracked *.cc and *.h file (git ls-files), or every one under the source
#   tree outside build/ when this is not a git checkout.
set -euo pipefail
cd "$(dirname "$0")/.."

clang_format=${CLANG_FORMAT:-clang-format}
command -v "$clang_format" >/dev/null || {
  echo "check-format: $clang_format not found (Debian: clang-format; scripts/install-deps.sh --test installs it)" >&2
  exit 2
}

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files -- '*.cc' '*.h')
  else
    mapfile -t files < <(find . -path ./build -prune -o \( -name '*.cc' -o -name '*.h' \) -print | sort)
  fi
fi

unformatted=()
for file in "${files[@]}"; do
  if ! "$clang_format" --dry-run --Werror "$file" >/dev/null 2>&1; then
    unformatted+=("$file")
  fi
done

if [ ${#unformatted[@]} -eq 0 ]; then
  echo "check-format: ${#files[@]} files formatted ($("$clang_format" --version))"
  exit 0
fi
for file in "${unformatted[@]}"; do
  echo "--- $file"
  "$clang_format" "$file" | diff -u "$file" - | tail -n +3 | head -n 40 || true
done
echo "check-format: ${#unformatted[@]} of ${#files[@]} files are not formatted: ${unformatted[*]}" >&2
echo "check-format: run 'make format' (clang-format -i on them) and commit the result" >&2
exit 1
