#!/usr/bin/env bash
# Checks that every C++ file git tracks is formatted as .clang-format says (Google style,
# 100 columns; Debian 12's clang-format 14). Lists the files that are not and exits 1.
# --fix formats them in place instead.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "check-format: clang-format is not installed (scripts/install-deps.sh installs it)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu')
if [[ "${1:-}" == "--fix" ]]; then
  mapfile -t files < <(for f in "${files[@]}"; do [[ -f "$f" ]] && echo "$f"; done)
  clang-format -i "${files[@]}"
  echo "check-format: formatted ${#files[@]} files"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  [[ -f "$f" ]] || continue  # deleted in the work tree, not yet committed
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  echo "check-format: ${#bad[@]} of ${#files[@]} files are not formatted as .clang-format says:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "check-format: run scripts/check-format.sh --fix (or clang-format -i FILE)" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted as .clang-format says ($(clang-format --version | head -1))"
