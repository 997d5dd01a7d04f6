"""Slurm for a run directory: job plan, partition limits, submit settings, job ledger, queued jobs, the way out."""
