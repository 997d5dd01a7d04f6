#!/usr/bin/env bash
# The whole bag on Torch: every stage of the config, split mode (Paddle on L40S, Dell and MinerU
# on H200, fusion and review on cs). Takes the same options as submit_newsbag_from_dir.sh except
# --stages and --gpu; e.g. submit_newsbag_full.sh --input-dir /scratch/$USER/pages --shards 8
set -euo pipefail
for arg in "$@"; do
  case "$arg" in
    --stages|--stages=*|--gpu|--gpu=*)
      echo "$(basename "$0"): error: $arg is fixed here (all stages, --gpu split); use submit_newsbag_from_dir.sh" >&2
      exit 2 ;;
  esac
done
exec bash "$(dirname "${BASH_SOURCE[0]}")/submit_newsbag_from_dir.sh" --gpu split "$@"
