#!/usr/bin/env bash
# Fail if any tracked C/CUDA source differs from what clang-format makes of it (.clang-format).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check-format: clang-format not installed"; exit 77; }
files=$(git ls-files '*.c' '*.h' '*.cu' '*.cuh' 2>/dev/null || true)
[ -n "$files" ] || { echo "check-format: no git checkout here"; exit 77; }
bad=0
for f in $files; do
  if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "not clang-formatted: $f (run: clang-format -i $f)"
    bad=1
  fi
done
exit $bad
