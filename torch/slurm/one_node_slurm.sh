#!/usr/bin/env bash
# Install and start (as root) a one-node Slurm (Debian slurm-wlm 22.05 + munge) on 127.0.0.1 that mimics
# NYU Torch's layout: partitions l40s_public, h200_public, cs and a node with gpu:l40s:1,gpu:h200:1
# backed by dummy device files. Idempotent; run as root on Debian. Recipe facts: docs/design.md, One-node Slurm.
set -euo pipefail

log() { printf 'slurm_setup: %s\n' "$*" >&2; }
die() { printf 'slurm_setup: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (it installs packages and starts daemons)"

STATE_DIR=/var/lib/newsbag-slurm
CONF_DIR=/etc/slurm
NODE=$(hostname -s)

# 1. Packages.
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
   || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
  log "installing slurm-wlm and munge"
  export DEBIAN_FRONTEND=noninteractive
  for attempt in 1 2 3 4 5 6; do
    # Another apt run (a parallel setup step) may hold the dpkg lock: wait and retry.
    if apt-get update -q && apt-get install -y -q --no-install-recommends slurm-wlm munge; then
      break
    fi
    [ "$attempt" = 6 ] && die "apt-get install slurm-wlm munge failed 6 times"
    sleep 10
  done
fi

# 2. Munge: a key readable only by munge, and munged running.
install -d -o munge -g munge -m 0700 /etc/munge
if [ ! -s /etc/munge/munge.key ]; then
  log "creating /etc/munge/munge.key"
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
install -d -o munge -g munge -m 0755 /run/munge
install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  log "starting munged"
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.2; done
  munge -n | unmunge >/dev/null || die "munged did not come up (see /var/log/munge/munged.log)"
fi

# 3. Config. CPUs and memory come from `slurmd -C` so the node never registers INVALID.
install -d -m 0755 "$CONF_DIR" "$STATE_DIR" /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
# gres.conf needs File= pointing at an existing file, or the node registers INVALID.
touch "$STATE_DIR/gpu-l40s-0" "$STATE_DIR/gpu-h200-0"
hw=$(slurmd -C | head -n 1)
cpus=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$hw")
mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")
if [ -z "$cpus" ] || [ -z "$mem" ]; then die "cannot read CPUs/RealMemory from 'slurmd -C': $hw"; fi
mem=$(( mem * 95 / 100 ))

slurm_conf=$(cat <<EOF
# Written by newsbag .ci/slurm_setup.sh: one-node test cluster shaped like NYU Torch.
ClusterName=newsbag
SlurmctldHost=${NODE}(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
GresTypes=gpu
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=5,bf_interval=5
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# Keep finished jobs visible to squeue/scontrol for an hour: there is no accounting database here.
MinJobAge=3600
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
NodeName=${NODE} NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${mem} Gres=gpu:l40s:1,gpu:h200:1 State=UNKNOWN
PartitionName=cs Nodes=${NODE} Default=YES MaxTime=INFINITE State=UP
PartitionName=l40s_public Nodes=${NODE} MaxTime=INFINITE State=UP
PartitionName=h200_public Nodes=${NODE} MaxTime=INFINITE State=UP
EOF
)
gres_conf=$(cat <<EOF
# Written by newsbag .ci/slurm_setup.sh: dummy devices, one per GPU type.
AutoDetect=off
NodeName=${NODE} Name=gpu Type=l40s File=${STATE_DIR}/gpu-l40s-0
NodeName=${NODE} Name=gpu Type=h200 File=${STATE_DIR}/gpu-h200-0
EOF
)

changed=0
write_if_changed() {  # path content
  if [ ! -f "$1" ] || [ "$(cat "$1")" != "$2" ]; then
    printf '%s\n' "$2" > "$1.tmp" && mv "$1.tmp" "$1"
    changed=1
  fi
}
write_if_changed "$CONF_DIR/slurm.conf" "$slurm_conf"
write_if_changed "$CONF_DIR/gres.conf" "$gres_conf"

# 4. Daemons. Stop only the ones this script started (by their pid files) when the config changed.
pid_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
stop_pidfile() {
  if pid_alive "$1"; then
    local pid; pid=$(cat "$1"); kill "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  fi
}
if [ "$changed" = 1 ]; then
  stop_pidfile /run/slurmd.pid
  stop_pidfile /run/slurmctld.pid
fi
if ! pid_alive /run/slurmctld.pid; then
  log "starting slurmctld"
  slurmctld
fi
for _ in $(seq 50); do scontrol ping >/dev/null 2>&1 && break; sleep 0.2; done
scontrol ping | grep -q UP || die "slurmctld is not answering (see /var/log/slurm/slurmctld.log)"
if ! pid_alive /run/slurmd.pid; then
  log "starting slurmd"
  slurmd
fi

# 5. Wait for the node to be usable; bring it back if an earlier run left it down.
state=""
for _ in $(seq 60); do
  state=$(sinfo -h -n "$NODE" -o '%T' | head -n 1)
  case "$state" in
    idle*|mixed*|allocated*|completing*) break ;;
    down*|drain*|fail*) scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true ;;
  esac
  sleep 1
done
case "$state" in
  idle*|mixed*|allocated*|completing*) ;;
  *) die "node $NODE is '$state' after 60 s (see /var/log/slurm/slurmd.log and 'scontrol show node')" ;;
esac
log "ready: node $NODE ($cpus CPUs, ${mem} MB) partitions: $(sinfo -h -o '%P' | paste -sd ' ')"
