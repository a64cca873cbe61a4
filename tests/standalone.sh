#!/usr/bin/env bash
# The repository stands alone: nothing it builds, tests or documents reads or
# links a path outside it. Fails naming every tracked file that refers to the
# directory beside the clone, to an absolute workspace path, or climbs out of
# the source tree from CMake.
set -euo pipefail
root=${1:?usage: standalone.sh SOURCE_DIR}
cd "$root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files)
else
  mapfile -t files < <(find . -type f -not -path './build/*' -not -path '*/node_modules/*' \
                         -not -path './.git/*' | sed 's|^\./||')
fi
# Patterns are built from pieces so this script does not match itself.
up='\.\./'
patterns=("${up}shared" '/work/(main|shared)' 'PROJECT_SOURCE_DIR\}/'"${up}" 'CMAKE_SOURCE_DIR\}/'"${up}")
bad=0
for p in "${patterns[@]}"; do
  hits=$(printf '%s\0' "${files[@]}" | xargs -0 grep -InE -- "$p" 2>/dev/null || true)
  if [[ -n $hits ]]; then
    echo "refers outside the repository ($p):"
    echo "$hits"
    bad=1
  fi
done
echo "checked ${#files[@]} files"
if (( bad )); then echo "standalone: FAILED"; exit 1; fi
echo "standalone: ok"
