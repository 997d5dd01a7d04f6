#!/usr/bin/env bash
# Shared body of every newsbag sbatch job: point caches at scratch, check the envs, run `newsbag run`.
#
# Usage (from an outer .sbatch script): bash _newsbag_job.sh gpu|cpu
# Reads (exported by submit_newsbag_from_dir.sh, or by hand with sbatch --export):
#   NEWSBAG_RUN_DIR   run directory whose manifests/pages.jsonl already exists (required)
#   NEWSBAG_STAGES    stages to run, separated by , or + (required)
#   NEWSBAG_SHARDS    N when the job is an array over N manifest slices (task K runs --shard K/N)
#   NEWSBAG_CONFIG    pipeline config JSON (default: the run's recorded config, else the one newsbag ships)
#   NEWSBAG_PY        interpreter with newsbag installed (default $VENV_DIR/bin/python)
#   BASE              scratch root for caches (default /scratch/$USER/newsbag)
#   NEWSBAG_ALLOW_PARTIAL=1  let the job succeed when only some pages failed (exit 4), so the
#                     dependent fusion job still runs; the failures stay in the run's ledger.
#   NEWSBAG_DEVICE    cpu: run every model stage with --device cpu (jobs on the CPU partition)
#   NEWSBAG_DOCTOR=1  run `newsbag doctor` for the job's stages on this node first (canary jobs)
#   NEWSBAG_RETRY_FAILED=1  also retry pages that crashed or hung their runner (`newsbag run --retry-failed`)
# A requeued or preempted job simply runs this again: `newsbag run` skips finished pages.
set -euo pipefail

kind=${1:?usage: _newsbag_job.sh gpu|cpu}
fail() { echo "newsbag job: error: $*" >&2; exit "${2:-3}"; }

export PYTHONUNBUFFERED=1
BASE=${BASE:-/scratch/${USER:-$(id -un)}/newsbag}
VENV_DIR=${VENV_DIR:-$BASE/venv}
NEWSBAG_PY=${NEWSBAG_PY:-$VENV_DIR/bin/python}
: "${NEWSBAG_RUN_DIR:?set NEWSBAG_RUN_DIR (submit with submit_newsbag_from_dir.sh)}"
: "${NEWSBAG_STAGES:?set NEWSBAG_STAGES (submit with submit_newsbag_from_dir.sh)}"
NEWSBAG_STAGES=${NEWSBAG_STAGES//+/,}  # sbatch --export splits on commas, so by-hand submits may use +

# Model and package caches on scratch (shared between jobs, never $HOME quota); temp files on
# node-local disk. Values already set by the user or by the config's env blocks win.
cache=${NEWSBAG_CACHE:-$BASE/cache}
export HF_HOME=${HF_HOME:-$cache/hf}
export PADDLE_PDX_CACHE_HOME=${PADDLE_PDX_CACHE_HOME:-$cache/paddlex}
export TORCH_HOME=${TORCH_HOME:-$cache/torch}
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$cache/xdg}
export MODELSCOPE_CACHE=${MODELSCOPE_CACHE:-$cache/modelscope}
export TMPDIR=${SLURM_TMPDIR:-${TMPDIR:-/tmp}}/newsbag-${SLURM_JOB_ID:-$$}
mkdir -p "$HF_HOME" "$PADDLE_PDX_CACHE_HOME" "$TORCH_HOME" "$XDG_CACHE_HOME" "$MODELSCOPE_CACHE" "$TMPDIR"

# An array task is J_T (what squeue, sacct and scancel take); a plain job is its id.
job=${SLURM_JOB_ID:-local}
[ -n "${SLURM_ARRAY_JOB_ID:-}" ] && [ -n "${SLURM_ARRAY_TASK_ID:-}" ] && job=${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}
# How the job ended, in RUN/slurm/exits/<job>.json: `newsbag status` reads it once Slurm has forgotten
# the job on a cluster without accounting. Slurm's SIGTERM (time limit, scancel) is trapped, so bash
# waits for newsbag to stop and records 143: killed by the signal, bash would run the EXIT trap with $? 0.
record_exit() {
  local rc=$1 dir=$NEWSBAG_RUN_DIR/slurm/exits
  if [ "$job" != local ] && [ -d "$NEWSBAG_RUN_DIR" ] && mkdir -p "$dir" 2>/dev/null; then
    printf '{"job": "%s", "exit_code": %d, "host": "%s", "at": "%s"}\n' "$job" "$rc" "$(hostname -s)" "$(date -Is)" \
      >"$dir/.$job.json.tmp" && mv -f "$dir/.$job.json.tmp" "$dir/$job.json" \
      || echo "newsbag job: warning: could not write $dir/$job.json" >&2
  fi
}
trap 'rc=$?; rm -rf "$TMPDIR"; record_exit "$rc"' EXIT
trap 'exit 143' TERM

shard_args=()
task=""
if [ -n "${NEWSBAG_SHARDS:-}" ] && [ -n "${SLURM_ARRAY_TASK_ID:-}" ]; then
  shard_args=(--shard "${SLURM_ARRAY_TASK_ID}/${NEWSBAG_SHARDS}")
  task=" task ${SLURM_ARRAY_TASK_ID}/${NEWSBAG_SHARDS}"
fi
config_args=()
[ -n "${NEWSBAG_CONFIG:-}" ] && config_args=(--config "$NEWSBAG_CONFIG")

device_args=()
[ -n "${NEWSBAG_DEVICE:-}" ] && device_args=(--device "$NEWSBAG_DEVICE")
retry_args=()
[ "${NEWSBAG_RETRY_FAILED:-0}" = 1 ] && retry_args=(--retry-failed)
echo "newsbag job ${job}${task} ($kind) on $(hostname -s) partition ${SLURM_JOB_PARTITION:-none}" \
     "restart ${SLURM_RESTART_COUNT:-0} at $(date -Is)"
echo "  run dir ${NEWSBAG_RUN_DIR}; stages ${NEWSBAG_STAGES}; device ${NEWSBAG_DEVICE:-as configured}; config ${NEWSBAG_CONFIG:-<the run's recorded one, else newsbag's default>}"

# Env check: fail in seconds with a clear message instead of after the queue wait of the next job.
[ -x "$NEWSBAG_PY" ] || fail "NEWSBAG_PY=$NEWSBAG_PY is missing or not executable; set NEWSBAG_PY or VENV_DIR to the env where newsbag is installed"
"$NEWSBAG_PY" -c 'import newsbag' 2>/dev/null \
  || fail "newsbag is not importable with $NEWSBAG_PY; pip install -e \$PROJECT_ROOT into that env"
[ -f "$NEWSBAG_RUN_DIR/manifests/pages.jsonl" ] \
  || fail "no manifest $NEWSBAG_RUN_DIR/manifests/pages.jsonl; build it with 'newsbag pages' before submitting" 2
"$NEWSBAG_PY" -m newsbag slurm check-env "${config_args[@]}" --stages "$NEWSBAG_STAGES" \
  || fail "runner env check failed (lines above); fix the env paths in the config, then resubmit"

if [ "$kind" = gpu ]; then
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi || echo "newsbag job: warning: nvidia-smi failed" >&2
  else
    echo "newsbag job: warning: nvidia-smi not found on $(hostname -s); CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset}" >&2
  fi
fi

if [ "${NEWSBAG_DOCTOR:-0}" = 1 ]; then
  echo "newsbag job ${job}: newsbag doctor for stages ${NEWSBAG_STAGES} on this node"
  "$NEWSBAG_PY" -m newsbag doctor "${config_args[@]}" --stages "$NEWSBAG_STAGES" "${device_args[@]}" \
    || fail "newsbag doctor: not every member is ready on $(hostname -s) (table above); fix that before the real run"
fi

# Fusion and review use every CPU the job holds (model stages ignore --workers).
run_cmd=("$NEWSBAG_PY" -m newsbag run --run-dir "$NEWSBAG_RUN_DIR" "${config_args[@]}" --stages "$NEWSBAG_STAGES"
         "${shard_args[@]}" "${device_args[@]}" "${retry_args[@]}" --workers "${NEWSBAG_WORKERS:-${SLURM_CPUS_PER_TASK:-1}}")
printf '+'; printf ' %q' "${run_cmd[@]}"; printf '\n'
set +e
"${run_cmd[@]}"
rc=$?
set -e
echo "newsbag job ${job}${task}: newsbag run exited $rc at $(date -Is)"
if [ "$rc" = 4 ] && [ "${NEWSBAG_ALLOW_PARTIAL:-0}" = 1 ]; then
  echo "newsbag job: some pages failed; NEWSBAG_ALLOW_PARTIAL=1 so dependent jobs still run (see 'newsbag status')" >&2
  rc=0
fi
exit "$rc"
