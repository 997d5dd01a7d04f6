#!/usr/bin/env bash
# Try the whole Slurm path off-cluster: the embedded CPU bag under the Torch stage names
# (configs/slurm-try.json), split mode on a one-node Slurm shaped like Torch
# (start it once with: sudo torch/slurm/one_node_slurm.sh). No GPU, no weights, no network.
#
# Usage: torch/slurm/try_local_slurm.sh --input-dir DIR [any submit_newsbag_from_dir.sh option]
#   e.g. torch/slurm/try_local_slurm.sh --input-dir ../shared/samples --run-dir runs/slurm-try
# Then: newsbag status --run-dir runs/slurm-try; try --canary, a resubmit with only --run-dir, --gpu h200.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
if ! command -v sinfo >/dev/null || ! sinfo -h >/dev/null 2>&1; then
  echo "try_local_slurm.sh: error: no Slurm answers here; start the one-node cluster first: sudo $here/one_node_slurm.sh" >&2
  exit 3
fi
py=${NEWSBAG_PY:-$(command -v python3)}
"$py" -c 'import newsbag' 2>/dev/null || py=$root/.venv/bin/python
"$py" -c 'import newsbag' 2>/dev/null \
  || { echo "try_local_slurm.sh: error: newsbag is not importable; pip install -e '$root[embedded]' or set NEWSBAG_PY" >&2; exit 3; }
# Small requests that fit a laptop-sized node; every one can still be overridden.
export NEWSBAG_PY=$py NEWSBAG_CONFIG=${NEWSBAG_CONFIG:-$root/configs/slurm-try.json}
export BASE=${BASE:-$root/runs/slurm-try-base} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
for p in L40S H200 CPU; do
  for kv in CPUS=1 MEM=2G TIME=30; do
    v=${p}_${kv%%=*}
    export "$v=${!v:-${kv#*=}}"
  done
done
exec bash "$here/submit_newsbag_from_dir.sh" "$@"
