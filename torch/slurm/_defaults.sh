#!/usr/bin/env bash
# Defaults shared by the submit and preflight scripts (sourced, not run). Every value can be
# overridden by an environment variable of the same name.
# shellcheck shell=bash disable=SC2034
ACCOUNT=${ACCOUNT:-torch_pr_609_general}
L40S_PARTITION=${L40S_PARTITION:-l40s_public}
H200_PARTITION=${H200_PARTITION:-h200_public}
CPU_PARTITION=${CPU_PARTITION:-cs}
L40S_GRES=${L40S_GRES:-gpu:l40s:1}
H200_GRES=${H200_GRES:-gpu:h200:1}
L40S_MEM=${L40S_MEM:-64G};  L40S_TIME=${L40S_TIME:-12:00:00}; L40S_CPUS=${L40S_CPUS:-8}
H200_MEM=${H200_MEM:-96G};  H200_TIME=${H200_TIME:-12:00:00}; H200_CPUS=${H200_CPUS:-8}
CPU_MEM=${CPU_MEM:-32G};    CPU_TIME=${CPU_TIME:-24:00:00};   CPU_CPUS=${CPU_CPUS:-8}
BASE=${BASE:-/scratch/${USER:-$(id -un)}/newsbag}
PROJECT_ROOT=${PROJECT_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
VENV_DIR=${VENV_DIR:-$BASE/venv}
NEWSBAG_PY=${NEWSBAG_PY:-$VENV_DIR/bin/python}
if [ -z "${NEWSBAG_CONFIG:-}" ] && [ -f "$PROJECT_ROOT/configs/pipeline.torch.json" ]; then
  NEWSBAG_CONFIG=$PROJECT_ROOT/configs/pipeline.torch.json
fi
