#!/usr/bin/env bash
# Build a run's page manifest from an input folder, then submit the newsbag inference and fusion/review jobs.
set -euo pipefail

SLURM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROG=$(basename "$0")

usage() {
  cat <<EOF
usage: $PROG --input-dir DIR [--input-dir DIR ...] [--recursive] [--gpu l40s|h200|split|cpu]
                   [--stages CSV] [--max-pages N] [--run-dir D] [--shards N] [--canary] [--dry-run]
       $PROG --run-dir D [--retry-failed]   (resubmit: D's manifest and the settings of its first submit)

Modes (--gpu, default split):
  l40s | h200  one GPU inference job with every selected model stage, then fusion/review on CPU;
               h200 refuses Paddle stages (Paddle has no CUDA kernels for the H200)
  split        L40S job for the Paddle stages (every model stage not in SPLIT_H200_STAGES, and
               Paddle stages even if listed there), H200 job for SPLIT_H200_STAGES (default
               dell,mineru), CPU job afterok on both
  cpu          inference (with --device cpu; stages that require CUDA are refused) and
               fusion/review all on the CPU partition
Fusion, review and other builtin stages always run in a CPU job, never in a GPU allocation.
--shards N makes each inference job an array of N tasks over slices of the manifest; the
fusion/review job waits (afterok) for the whole array. When an inference job (or any task)
fails, Slurm cancels the fusion/review job (--kill-on-invalid-dep=yes); 'newsbag status' names
the job or task that failed, its log and last error line. --dry-run prints the commands and
writes nothing. A job with no selected stage, or whose stages are all finished, is not submitted.
--canary sends the first page through every selected stage into D/canary on short jobs
(CANARY_TIME, default 00:30:00); each GPU job runs 'newsbag doctor' on its node first.
A page that crashed or hung its runner is held back by a resubmit (no job is planned for it);
--retry-failed plans jobs for such pages too and runs them with 'newsbag run --retry-failed'
(this submit only: it is not remembered for later ones).

The run dir remembers how it was first submitted (D/slurm/submit.json: config, --gpu, --stages,
--shards, resources, NEWSBAG_ALLOW_PARTIAL); a later submit into D reuses every setting that
is not given again. A run dir made with 'newsbag run --config F' keeps the config it recorded
(D/config.resolved.json) unless NEWSBAG_CONFIG is given. Jobs of D that can never start (a job they wait for failed, even before
Slurm noticed) are cancelled; while other jobs of D are queued or running, a submit is
refused. Requests are checked against the partitions' limits (sinfo/scontrol) and refused if
no node could ever run them.

Environment overrides: ACCOUNT (torch_pr_609_general), L40S_PARTITION (l40s_public),
H200_PARTITION (h200_public), CPU_PARTITION (cs), L40S_GRES, H200_GRES, {L40S,H200,CPU}_MEM,
{L40S,H200,CPU}_TIME, {L40S,H200,CPU}_CPUS, {L40S,H200,CPU}_EXTRA (more sbatch options),
BASE (/scratch/\$USER/newsbag), PROJECT_ROOT, VENV_DIR (\$BASE/venv), NEWSBAG_PY
(\$VENV_DIR/bin/python; a resubmit: D's recorded one), NEWSBAG_CONFIG (D's recorded config, else
\$PROJECT_ROOT/configs/pipeline.torch.json if present),
SPLIT_H200_STAGES (dell,mineru), NEWSBAG_ALLOW_PARTIAL=1 (fusion runs even if some pages failed),
CANARY_TIME (00:30:00), CHECK_LIMITS=0 (skip the partition limit check).
EOF
}
die() { echo "$PROG: error: $*" >&2; exit 2; }

input_dirs=()
recursive=0
gpu=""
stages=""
stages_given=0
max_pages=""
run_dir=""
shards=""
dry_run=0
canary=0
retry_failed=0
while [ $# -gt 0 ]; do
  opt=$1
  case "$opt" in
    --*=*) set -- "${opt%%=*}" "${opt#*=}" "${@:2}"; continue ;;
    -h|--help) usage; exit 0 ;;
    --recursive) recursive=1; shift; continue ;;
    --dry-run) dry_run=1; shift; continue ;;
    --canary) canary=1; shift; continue ;;
    --retry-failed) retry_failed=1; shift; continue ;;
    --input-dir|--gpu|--stages|--max-pages|--run-dir|--shards)
      [ $# -ge 2 ] || die "$opt needs a value" ;;
    *) die "unknown option '$opt' (see --help)" ;;
  esac
  case "$opt" in
    --input-dir) input_dirs+=("$2") ;;
    --gpu) gpu=$2 ;;
    --stages) stages=$2; stages_given=1 ;;
    --max-pages) max_pages=$2 ;;
    --run-dir) run_dir=$2 ;;
    --shards) shards=$2 ;;
  esac
  shift 2
done

[ -z "$gpu" ] || case "$gpu" in
  l40s|h200|split|cpu) ;;
  *) die "unknown --gpu '$gpu' (choose l40s, h200, split or cpu)" ;;
esac
[ -z "$shards" ] || [[ "$shards" =~ ^[1-9][0-9]*$ ]] || die "--shards must be a positive integer, got '$shards'"
[ -z "$max_pages" ] || [[ "$max_pages" =~ ^[1-9][0-9]*$ ]] || die "--max-pages must be a positive integer, got '$max_pages'"
for d in "${input_dirs[@]}"; do
  [ -d "$d" ] || die "--input-dir $d is not a directory"
done
if [ ${#input_dirs[@]} -eq 0 ]; then
  [ -n "$run_dir" ] || die "give --input-dir DIR (or --run-dir D of an earlier run to resubmit it)"
  [ -f "$run_dir/manifests/pages.jsonl" ] || die "no --input-dir and $run_dir/manifests/pages.jsonl does not exist"
fi
[ -z "$run_dir" ] || case "$run_dir" in /*) ;; *) run_dir=$PWD/$run_dir ;; esac

# An existing run: what it recorded (the settings of its first submit, else the config
# `newsbag run --config F` recorded) applies wherever this call gives none.
recalled=()
if [ -n "$run_dir" ] && [ -d "$run_dir" ]; then
  # Reading the settings needs Python: without NEWSBAG_PY or VENV_DIR, the interpreter the first
  # submit recorded (read here without Python: `slurm.settings.save_settings` writes one "KEY": "value" a line;
  # a value with JSON escapes is not read, and the default below is named instead).
  settings_file=$run_dir/slurm/submit.json
  recorded_py=""
  if [ -z "${NEWSBAG_PY:-}" ] && [ -z "${VENV_DIR:-}" ] && [ -f "$settings_file" ]; then
    recorded_py=$(sed -n 's/^ *"NEWSBAG_PY": "\([^"\\]*\)",\{0,1\}$/\1/p' "$settings_file" | head -n 1)
  fi
  py=${NEWSBAG_PY:-${recorded_py:-${VENV_DIR:-${BASE:-/scratch/${USER:-$(id -un)}/newsbag}/venv}/bin/python}}
  [ -x "$py" ] || die "NEWSBAG_PY=$py${recorded_py:+ (recorded in $settings_file)} is missing or not executable; set NEWSBAG_PY or VENV_DIR to the env where newsbag is installed"
  settings=$("$py" -m newsbag slurm recall --run-dir "$run_dir" 2>&1) || die "${settings#newsbag: error: }"
  while IFS=$'\t' read -r key value; do
    case "$key" in
      GPU_MODE) [ -n "$gpu" ] || { gpu=$value; recalled+=("--gpu $value"); } ;;
      STAGES) [ "$stages_given" = 1 ] || { stages=$value; recalled+=("--stages ${value:-<all>}"); } ;;
      SHARDS) [ -n "$shards" ] || { shards=$value; recalled+=("--shards $value"); } ;;
      [A-Z]*) if [ -z "${!key+x}" ]; then export "$key=$value"; recalled+=("$key=$value"); fi ;;
    esac
  done <<<"$settings"
  [ ${#recalled[@]} -eq 0 ] || echo "$PROG: reusing the settings recorded in $run_dir: ${recalled[*]}" >&2
fi
gpu=${gpu:-split}
shards=${shards:-1}

# shellcheck source=_defaults.sh
source "$SLURM_DIR/_defaults.sh"
SPLIT_H200_STAGES=${SPLIT_H200_STAGES:-dell,mineru}
NEWSBAG_CONFIG=${NEWSBAG_CONFIG:-}
case "$NEWSBAG_CONFIG" in ""|/*) ;; *) NEWSBAG_CONFIG=$PWD/$NEWSBAG_CONFIG ;; esac
if [ "$canary" = 1 ]; then
  CANARY_TIME=${CANARY_TIME:-00:30:00}
  L40S_TIME=$CANARY_TIME; H200_TIME=$CANARY_TIME; CPU_TIME=$CANARY_TIME
fi
L40S_EXTRA=${L40S_EXTRA:-}; H200_EXTRA=${H200_EXTRA:-}; CPU_EXTRA=${CPU_EXTRA:-}
export ACCOUNT L40S_PARTITION H200_PARTITION CPU_PARTITION L40S_GRES H200_GRES \
       L40S_MEM H200_MEM CPU_MEM L40S_TIME H200_TIME CPU_TIME L40S_CPUS H200_CPUS CPU_CPUS \
       L40S_EXTRA H200_EXTRA CPU_EXTRA

[ -x "$NEWSBAG_PY" ] || die "NEWSBAG_PY=$NEWSBAG_PY is missing or not executable; set NEWSBAG_PY or VENV_DIR to the env where newsbag is installed"
config_args=()
[ -n "$NEWSBAG_CONFIG" ] && config_args=(--config "$NEWSBAG_CONFIG")
limit_args=()
if [ "${CHECK_LIMITS:-1}" = 0 ] || [ "$dry_run" = 1 ] || ! command -v sinfo >/dev/null; then
  limit_args=(--no-check-limits)
fi

# The plan (partition rules, limits) is checked before anything is written.
retry_args=()
[ "$retry_failed" = 1 ] && retry_args=(--retry-failed)
plan() {  # extra args for `newsbag slurm plan`; prints the job table
  "$NEWSBAG_PY" -m newsbag slurm plan "${config_args[@]}" --stages "$stages" --gpu "$gpu" \
    --split-h200 "$SPLIT_H200_STAGES" --shards "$shards" "${limit_args[@]}" "${retry_args[@]}" "$@"
}
plan_err=$(mktemp)
trap 'rm -f "$plan_err"' EXIT
if ! job_table=$(plan 2>"$plan_err"); then
  msg=$(grep -v '^note: ' "$plan_err" | tail -n 1)
  die "${msg#newsbag: error: }"
fi

# Missing runner envs are only warned about here: compute nodes may mount what this host lacks;
# the job's own env check then fails in seconds with the same message.
if ! env_report=$("$NEWSBAG_PY" -m newsbag slurm check-env "${config_args[@]}" --stages "$stages" 2>&1); then
  echo "$PROG: warning: jobs for these stages will fail unless the env exists on the compute nodes:" >&2
  printf '%s\n' "$env_report" | sed 's/^/  /' >&2
fi

[ -n "$run_dir" ] || run_dir=$BASE/runs/$(basename "${input_dirs[0]}")-$(date +%Y%m%d-%H%M%S)
newsbag_cli=("$NEWSBAG_PY" -m newsbag)
show() { printf '+'; printf ' %q' "$@"; printf '\n'; }

if [ "$dry_run" = 0 ]; then
  command -v sbatch >/dev/null || die "sbatch not found: run this on a Slurm login node (or use --dry-run)"
  mkdir -p "$run_dir/slurm"
  # One submit at a time per run dir: a second one waits here, then sees the first's jobs and stops.
  exec 9>"$run_dir/slurm/.submit.lock"
  flock -w 600 9 || die "another submit into $run_dir has held $run_dir/slurm/.submit.lock for 10 minutes"
  if [ -f "$run_dir/slurm/jobs.jsonl" ]; then
    # What it cancelled and why is reported even when it then refuses (other jobs still queued).
    stale_rc=0
    stale_out=$("${newsbag_cli[@]}" slurm stale --run-dir "$run_dir" --cancel 2>&1) || stale_rc=$?
    report=$(grep -v '^newsbag: error: ' <<<"$stale_out" || true)
    [ -z "$report" ] || printf '%s\n' "$report" >&2
    [ "$stale_rc" = 0 ] || die "${stale_out##*newsbag: error: }"
  fi
  mkdir -p "$run_dir/logs/slurm"
fi

# 1. The manifest, built once here so jobs (and array tasks) only ever read it.
if [ ${#input_dirs[@]} -gt 0 ]; then
  pages_cmd=("${newsbag_cli[@]}" pages --run-dir "$run_dir")
  for d in "${input_dirs[@]}"; do pages_cmd+=(--input-dir "$d"); done
  [ "$recursive" = 1 ] && pages_cmd+=(--recursive)
  [ -n "$max_pages" ] && pages_cmd+=(--max-pages "$max_pages")
  show "${pages_cmd[@]}"
  if [ "$dry_run" = 0 ]; then
    rc=0
    pages_out=$("${pages_cmd[@]}" 2>&1) || rc=$?
    printf '%s\n' "$pages_out"
    # 4 = some inputs rejected (listed in manifests/rejected.jsonl): the others still run.
    [ "$rc" = 0 ] || [ "$rc" = 4 ] || die "building the manifest failed: $(tail -n 1 <<<"$pages_out")"
  fi
fi

if [ "$dry_run" = 0 ]; then
  # Remembered for resubmits (the canary's settings are the real run's settings).
  remember=(NEWSBAG_CONFIG="$NEWSBAG_CONFIG" GPU_MODE="$gpu" STAGES="$stages" SHARDS="$shards"
            SPLIT_H200_STAGES="$SPLIT_H200_STAGES" NEWSBAG_ALLOW_PARTIAL="${NEWSBAG_ALLOW_PARTIAL:-0}"
            NEWSBAG_PY="$NEWSBAG_PY" BASE="$BASE" ACCOUNT="$ACCOUNT" L40S_GRES="$L40S_GRES" H200_GRES="$H200_GRES")
  for p in L40S H200 CPU; do
    for k in PARTITION MEM TIME CPUS EXTRA; do
      v=${p}_$k
      [ "$canary" = 1 ] && [ "$k" = TIME ] && continue
      remember+=("$v=${!v}")
    done
  done
  "${newsbag_cli[@]}" slurm remember --run-dir "$run_dir" "${remember[@]}" >/dev/null
  if [ "$canary" = 1 ]; then
    run_dir=$("${newsbag_cli[@]}" slurm canary --run-dir "$run_dir") || die "could not make the canary run dir"
    shards=1
    mkdir -p "$run_dir/logs/slurm" "$run_dir/slurm"
  fi
  n_pages=$(grep -c . "$run_dir/manifests/pages.jsonl" || true)
  [ "$n_pages" -gt 0 ] || die "$run_dir/manifests/pages.jsonl lists no pages"
  if [ "$shards" -gt "$n_pages" ]; then
    echo "$PROG: note: --shards $shards > $n_pages pages; using $n_pages array tasks" >&2
    shards=$n_pages
  fi
  # Only stages with pending pages get a job, and an array only the slices with pending pages.
  if ! job_table=$(plan --run-dir "$run_dir" 2>"$plan_err"); then
    msg=$(grep -v '^note: ' "$plan_err" | tail -n 1)
    die "${msg#newsbag: error: }"
  fi
fi
sed "s/^note: /$PROG: note: /" "$plan_err" >&2
if [ -z "$job_table" ]; then
  echo "nothing to submit: every selected stage of $run_dir is finished (newsbag status --run-dir $(printf %q "$run_dir"))"
  exit 0
fi

# 2. The jobs. Arrays get one log per task; --requeue is safe because `newsbag run` resumes.
job_id=""
prefix=""
[ "$canary" = 1 ] && prefix=canary-
submit() {  # kind partition gres mem time cpus extra script device stages dependency array; sets job_id
  local kind=$prefix$1 part=$2 gres=$3 mem=$4 time=$5 cpus=$6 extra=$7 script=$8 device=$9 st=${10}
  local dep=${11} array=${12}
  local log=$run_dir/logs/slurm/%x-%j.out n_shards="" doctor=0
  if [ -n "$array" ]; then log=$run_dir/logs/slurm/%x-%A_%a.out; n_shards=$shards; fi
  [ "$canary" = 1 ] && [ -n "$gres" ] && doctor=1
  local cmd=(env "NEWSBAG_RUN_DIR=$run_dir" "NEWSBAG_STAGES=$st" "NEWSBAG_SHARDS=$n_shards"
             "NEWSBAG_CONFIG=$NEWSBAG_CONFIG" "NEWSBAG_PY=$NEWSBAG_PY" "NEWSBAG_SLURM_DIR=$SLURM_DIR"
             "BASE=$BASE" "PROJECT_ROOT=$PROJECT_ROOT" "NEWSBAG_ALLOW_PARTIAL=${NEWSBAG_ALLOW_PARTIAL:-0}"
             "NEWSBAG_DEVICE=$device" "NEWSBAG_DOCTOR=$doctor" "NEWSBAG_RETRY_FAILED=$retry_failed"
             sbatch --parsable -A "$ACCOUNT" -p "$part")
  [ -n "$gres" ] && cmd+=("--gres=$gres")
  cmd+=("--cpus-per-task=$cpus" "--mem=$mem" "--time=$time" "--job-name=newsbag-$kind"
        "--output=$log" --requeue --open-mode=append)
  [ -n "$array" ] && cmd+=("--array=$array")
  # A job whose dependency failed can never run: Slurm cancels it instead of leaving it queued.
  [ -n "$dep" ] && cmd+=("--dependency=$dep" --kill-on-invalid-dep=yes)
  # shellcheck disable=SC2206  # *_EXTRA is a word list of sbatch options on purpose
  [ -n "$extra" ] && cmd+=($extra)
  cmd+=("$SLURM_DIR/$script")
  show "${cmd[@]}"
  if [ "$dry_run" = 1 ]; then
    job_id="<$kind>"
    return
  fi
  local out
  out=$("${cmd[@]}") || die "sbatch for the $kind job failed (see above); jobs before it stay submitted: ${submitted:-none}"
  job_id=${out%%;*}
  "$NEWSBAG_PY" -m newsbag slurm record --run-dir "$run_dir" --job-id "$job_id" --kind "$kind" \
    --partition "$part" --gres "$gres" --stages "$st" --array "$array" --dependency "$dep" \
    --log "$log" --script "$script" || die "job $job_id submitted but not recorded in $run_dir/slurm/jobs.jsonl"
  submitted="${submitted:+$submitted }$job_id"
  echo "submitted $kind job $job_id: stages $st on $part${gres:+ ($gres)}${device:+ --device $device}${array:+ array $array}${dep:+ $dep}"
}

infer_ids=()
# Fields are tab-separated; read splits on \037 because runs of tabs (empty gres, extra) would merge.
while IFS=$'\037' read -r kind part gres mem time cpus extra script device st array; do
  # The plan gives the fusion/review job no array; it waits for every inference job before it.
  dep=""
  [ "$kind" = fuse-review ] && [ ${#infer_ids[@]} -gt 0 ] && dep=afterok:$(IFS=:; echo "${infer_ids[*]}")
  submit "$kind" "$part" "$gres" "$mem" "$time" "$cpus" "$extra" "$script" "$device" "$st" "$dep" "$array"
  [ "$kind" = fuse-review ] || infer_ids+=("$job_id")
done < <(tr '\t' '\037' <<<"$job_table")
if [ "$dry_run" = 1 ]; then
  echo "dry run: nothing written or submitted (run dir would be $run_dir)"
else
  echo "run dir $run_dir; follow with: newsbag status --run-dir $(printf %q "$run_dir")"
fi
