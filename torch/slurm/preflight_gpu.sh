#!/usr/bin/env bash
# Before a big submit: ask Slurm (sbatch --test-only) whether each job shape newsbag uses is valid
# for this account, and check the runner envs of the config. Nothing is queued.
set -uo pipefail

# shellcheck source=_defaults.sh
source "$(dirname "${BASH_SOURCE[0]}")/_defaults.sh"

command -v sbatch >/dev/null || { echo "preflight: error: sbatch not found; run this on a Slurm login node" >&2; exit 2; }
failed=0
check() {  # label partition gres mem time cpus
  local args=(--test-only -A "$ACCOUNT" -p "$2" --cpus-per-task="$6" --mem="$4" --time="$5")
  [ -n "$3" ] && args+=("--gres=$3")
  local out
  if out=$(sbatch "${args[@]}" --wrap true 2>&1); then
    echo "ok    $1: -A $ACCOUNT -p $2${3:+ --gres=$3} --mem=$4 --time=$5 (${out##*sbatch: })"
  else
    echo "FAIL  $1: -A $ACCOUNT -p $2${3:+ --gres=$3} --mem=$4 --time=$5: $out"
    failed=1
  fi
}
check l40s "$L40S_PARTITION" "$L40S_GRES" "$L40S_MEM" "$L40S_TIME" "$L40S_CPUS"
check h200 "$H200_PARTITION" "$H200_GRES" "$H200_MEM" "$H200_TIME" "$H200_CPUS"
check cpu  "$CPU_PARTITION" "" "$CPU_MEM" "$CPU_TIME" "$CPU_CPUS"

if [ -x "$NEWSBAG_PY" ]; then
  config_args=()
  [ -n "${NEWSBAG_CONFIG:-}" ] && config_args=(--config "$NEWSBAG_CONFIG")
  if "$NEWSBAG_PY" -m newsbag slurm check-env "${config_args[@]}"; then
    echo "ok    envs: every runner interpreter of ${NEWSBAG_CONFIG:-the default config} exists"
  else
    echo "FAIL  envs: see the lines above"
    failed=1
  fi
else
  echo "FAIL  NEWSBAG_PY=$NEWSBAG_PY is missing; set NEWSBAG_PY or VENV_DIR"
  failed=1
fi
exit "$failed"
