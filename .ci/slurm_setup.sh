#!/usr/bin/env bash
# CI: the one-node Slurm the submission tests use; the same command users run to try the Slurm path.
exec bash "$(dirname "$0")/../torch/slurm/one_node_slurm.sh" "$@"
