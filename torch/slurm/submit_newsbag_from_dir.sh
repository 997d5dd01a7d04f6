#!/usr/bin/env bash
# Build a run's page manifest from an input folder, then submit the newsbag inference and fusion/review jobs.
set -euo pipefail

SLURM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROG=$(basename "$0")

usage() {
  cat <<EOF
usage: $PROG --input-dir DIR [--input-dir DIR ...] [--recursive] [--gpu l40s|h200|split|cpu]
                   [--stages CSV] [--max-pages N] [--run-dir D] [--shards N] [--dry-run]
       $PROG --run-dir D [--gpu ...] [--stages CSV] [--shards N]   (rerun: reuse D's manifest)

Modes (--gpu, default split):
  l40s | h200  one GPU inference job with every selected model stage, then fusion/review on CPU
  split        L40S job for the Paddle stages (every model stage not in SPLIT_H200_STAGES),
               H200 job for SPLIT_H200_STAGES (default dell,mineru), CPU job afterok on both
  cpu          inference and fusion/review all on the CPU partition
--shards N makes each inference job an array of N tasks over slices of the manifest; the
fusion/review job waits (afterok) for the whole array. --dry-run prints the commands and
writes nothing. A mode's job with no selected stages is not submitted.

Environment overrides: ACCOUNT (torch_pr_609_general), L40S_PARTITION (l40s_public),
H200_PARTITION (h200_public), CPU_PARTITION (cs), L40S_GRES, H200_GRES, {L40S,H200,CPU}_MEM,
{L40S,H200,CPU}_TIME, {L40S,H200,CPU}_CPUS, {L40S,H200,CPU}_EXTRA (more sbatch options),
BASE (/scratch/\$USER/newsbag), PROJECT_ROOT, VENV_DIR (\$BASE/venv), NEWSBAG_PY
(\$VENV_DIR/bin/python), NEWSBAG_CONFIG (\$PROJECT_ROOT/configs/pipeline.torch.json if present),
SPLIT_H200_STAGES (dell,mineru), NEWSBAG_ALLOW_PARTIAL=1 (fusion runs even if some pages failed).
EOF
}
die() { echo "$PROG: error: $*" >&2; exit 2; }

input_dirs=()
recursive=0
gpu="split"
stages=""
max_pages=""
run_dir=""
shards=1
dry_run=0
while [ $# -gt 0 ]; do
  opt=$1
  case "$opt" in
    --*=*) set -- "${opt%%=*}" "${opt#*=}" "${@:2}"; continue ;;
    -h|--help) usage; exit 0 ;;
    --recursive) recursive=1; shift; continue ;;
    --dry-run) dry_run=1; shift; continue ;;
    --input-dir|--gpu|--stages|--max-pages|--run-dir|--shards)
      [ $# -ge 2 ] || die "$opt needs a value" ;;
    *) die "unknown option '$opt' (see --help)" ;;
  esac
  case "$opt" in
    --input-dir) input_dirs+=("$2") ;;
    --gpu) gpu=$2 ;;
    --stages) stages=$2 ;;
    --max-pages) max_pages=$2 ;;
    --run-dir) run_dir=$2 ;;
    --shards) shards=$2 ;;
  esac
  shift 2
done

case "$gpu" in
  l40s|h200|split|cpu) ;;
  *) die "unknown --gpu '$gpu' (choose l40s, h200, split or cpu)" ;;
esac
[[ "$shards" =~ ^[1-9][0-9]*$ ]] || die "--shards must be a positive integer, got '$shards'"
[ -z "$max_pages" ] || [[ "$max_pages" =~ ^[1-9][0-9]*$ ]] || die "--max-pages must be a positive integer, got '$max_pages'"
for d in "${input_dirs[@]}"; do
  [ -d "$d" ] || die "--input-dir $d is not a directory"
done
if [ ${#input_dirs[@]} -eq 0 ]; then
  [ -n "$run_dir" ] || die "give --input-dir DIR (or --run-dir D of an earlier run to resubmit it)"
  [ -f "$run_dir/manifests/pages.jsonl" ] || die "no --input-dir and $run_dir/manifests/pages.jsonl does not exist"
fi

# shellcheck source=_defaults.sh
source "$SLURM_DIR/_defaults.sh"
SPLIT_H200_STAGES=${SPLIT_H200_STAGES:-dell,mineru}
NEWSBAG_CONFIG=${NEWSBAG_CONFIG:-}

[ -x "$NEWSBAG_PY" ] || die "NEWSBAG_PY=$NEWSBAG_PY is missing or not executable; set NEWSBAG_PY or VENV_DIR to the env where newsbag is installed"
config_args=()
[ -n "$NEWSBAG_CONFIG" ] && config_args=(--config "$NEWSBAG_CONFIG")

# Stages are checked against the config before anything is written.
if ! stage_table=$("$NEWSBAG_PY" -m newsbag slurm stages "${config_args[@]}" --stages "$stages" 2>&1); then
  die "${stage_table#newsbag: error: }"
fi
model_stages=(); post_stages=()
while IFS=$'\t' read -r name kind; do
  case "$kind" in  # other lines are interpreter warnings on stderr, not stages
    model) model_stages+=("$name") ;;
    fusion|review) post_stages+=("$name") ;;
  esac
done <<<"$stage_table"

# Missing runner envs are only warned about here: compute nodes may mount what this host lacks;
# the job's own env check then fails in seconds with the same message.
if ! env_report=$("$NEWSBAG_PY" -m newsbag slurm check-env "${config_args[@]}" --stages "$stages" 2>&1); then
  echo "$PROG: warning: jobs for these stages will fail unless the env exists on the compute nodes:" >&2
  printf '%s\n' "$env_report" | sed 's/^/  /' >&2
fi

join() { local IFS=,; echo "$*"; }
in_list() { case ",$2," in *",$1,"*) return 0 ;; esac; return 1; }

# job slots: kind partition gres mem time cpus extra sbatch-script stages
jobs=()
add_infer() {  # kind partition gres mem time cpus extra script stage...
  local spec=("$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8"); shift 8
  [ $# -gt 0 ] && jobs+=("$(printf '%s\037' "${spec[@]}")$(join "$@")")
  return 0
}
case "$gpu" in
  l40s) add_infer infer-l40s "$L40S_PARTITION" "$L40S_GRES" "$L40S_MEM" "$L40S_TIME" "$L40S_CPUS" "${L40S_EXTRA:-}" newsbag_infer_l40s.sbatch "${model_stages[@]}" ;;
  h200) add_infer infer-h200 "$H200_PARTITION" "$H200_GRES" "$H200_MEM" "$H200_TIME" "$H200_CPUS" "${H200_EXTRA:-}" newsbag_infer_h200.sbatch "${model_stages[@]}" ;;
  cpu)  add_infer infer-cpu "$CPU_PARTITION" "" "$CPU_MEM" "$CPU_TIME" "$CPU_CPUS" "${CPU_EXTRA:-}" newsbag_cpu.sbatch "${model_stages[@]}" ;;
  split)
    l40s_part=(); h200_part=()
    for s in "${model_stages[@]}"; do
      if in_list "$s" "$SPLIT_H200_STAGES"; then h200_part+=("$s"); else l40s_part+=("$s"); fi
    done
    add_infer infer-l40s "$L40S_PARTITION" "$L40S_GRES" "$L40S_MEM" "$L40S_TIME" "$L40S_CPUS" "${L40S_EXTRA:-}" newsbag_infer_l40s.sbatch "${l40s_part[@]}"
    add_infer infer-h200 "$H200_PARTITION" "$H200_GRES" "$H200_MEM" "$H200_TIME" "$H200_CPUS" "${H200_EXTRA:-}" newsbag_infer_h200.sbatch "${h200_part[@]}"
    ;;
esac

[ ${#jobs[@]} -gt 0 ] || [ ${#post_stages[@]} -gt 0 ] || die "no stage selected for mode $gpu"
[ -n "$run_dir" ] || run_dir=$BASE/runs/$(basename "${input_dirs[0]}")-$(date +%Y%m%d-%H%M%S)
case "$run_dir" in /*) ;; *) run_dir=$PWD/$run_dir ;; esac
newsbag_cli=("$NEWSBAG_PY" -m newsbag)
show() { printf '+'; printf ' %q' "$@"; printf '\n'; }

# 1. The manifest, built once here so jobs (and array tasks) only ever read it.
if [ ${#input_dirs[@]} -gt 0 ]; then
  pages_cmd=("${newsbag_cli[@]}" pages --run-dir "$run_dir")
  for d in "${input_dirs[@]}"; do pages_cmd+=(--input-dir "$d"); done
  [ "$recursive" = 1 ] && pages_cmd+=(--recursive)
  [ -n "$max_pages" ] && pages_cmd+=(--max-pages "$max_pages")
  show "${pages_cmd[@]}"
  if [ "$dry_run" = 0 ]; then
    command -v sbatch >/dev/null || die "sbatch not found: run this on a Slurm login node (or use --dry-run)"
    mkdir -p "$run_dir/logs/slurm" "$run_dir/slurm"
    rc=0
    "${pages_cmd[@]}" || rc=$?
    # 4 = some inputs rejected (listed in manifests/rejected.jsonl): the others still run.
    [ "$rc" = 0 ] || [ "$rc" = 4 ] || die "building the manifest failed (newsbag pages exited $rc)"
  fi
elif [ "$dry_run" = 0 ]; then
  command -v sbatch >/dev/null || die "sbatch not found: run this on a Slurm login node (or use --dry-run)"
  mkdir -p "$run_dir/logs/slurm" "$run_dir/slurm"
fi

if [ "$dry_run" = 0 ]; then
  n_pages=$(grep -c . "$run_dir/manifests/pages.jsonl" || true)
  [ "$n_pages" -gt 0 ] || die "$run_dir/manifests/pages.jsonl lists no pages"
  if [ "$shards" -gt "$n_pages" ]; then
    echo "$PROG: note: --shards $shards > $n_pages pages; using $n_pages array tasks" >&2
    shards=$n_pages
  fi
fi

# 2. The jobs. Arrays get one log per task; --requeue is safe because `newsbag run` resumes.
job_id=""
submit() {  # kind partition gres mem time cpus extra script stages dependency array; sets job_id
  local kind=$1 part=$2 gres=$3 mem=$4 time=$5 cpus=$6 extra=$7 script=$8 st=$9 dep=${10} array=${11}
  local log=$run_dir/logs/slurm/%x-%j.out n_shards=""
  if [ -n "$array" ]; then log=$run_dir/logs/slurm/%x-%A_%a.out; n_shards=$shards; fi
  local cmd=(env "NEWSBAG_RUN_DIR=$run_dir" "NEWSBAG_STAGES=$st" "NEWSBAG_SHARDS=$n_shards"
             "NEWSBAG_CONFIG=$NEWSBAG_CONFIG" "NEWSBAG_PY=$NEWSBAG_PY" "NEWSBAG_SLURM_DIR=$SLURM_DIR"
             "BASE=$BASE" "PROJECT_ROOT=$PROJECT_ROOT" "NEWSBAG_ALLOW_PARTIAL=${NEWSBAG_ALLOW_PARTIAL:-0}"
             sbatch --parsable -A "$ACCOUNT" -p "$part")
  [ -n "$gres" ] && cmd+=("--gres=$gres")
  cmd+=("--cpus-per-task=$cpus" "--mem=$mem" "--time=$time" "--job-name=newsbag-$kind"
        "--output=$log" --requeue --open-mode=append)
  [ -n "$array" ] && cmd+=("--array=$array")
  [ -n "$dep" ] && cmd+=("--dependency=$dep")
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
  echo "submitted $kind job $job_id: stages $st on $part${gres:+ ($gres)}${array:+ array $array}${dep:+ $dep}"
}

array=""
[ "$shards" -gt 1 ] && array=0-$((shards - 1))
infer_ids=()
for spec in "${jobs[@]}"; do
  IFS=$'\037' read -r kind part gres mem time cpus extra script st <<<"$spec"
  submit "$kind" "$part" "$gres" "$mem" "$time" "$cpus" "$extra" "$script" "$st" "" "$array"
  infer_ids+=("$job_id")
done
if [ ${#post_stages[@]} -gt 0 ]; then
  dep=""
  [ ${#infer_ids[@]} -gt 0 ] && dep=afterok:$(IFS=:; echo "${infer_ids[*]}")
  submit fuse-review "$CPU_PARTITION" "" "$CPU_MEM" "$CPU_TIME" "$CPU_CPUS" "${CPU_EXTRA:-}" \
    newsbag_fuse_review_cs.sbatch "$(join "${post_stages[@]}")" "$dep" ""
fi
if [ "$dry_run" = 1 ]; then
  echo "dry run: nothing written or submitted (run dir would be $run_dir)"
else
  echo "run dir $run_dir; follow with: newsbag status --run-dir $run_dir"
fi
