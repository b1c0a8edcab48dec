#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for testing the slurm executor plugin.
#
#   tools/slurm-cluster.sh up       install slurm-wlm + munge (apt-get) if missing, start
#                                   munged, slurmctld and slurmd; a no-op when already up
#   tools/slurm-cluster.sh down     stop the daemons (by PID) and wait until they are gone
#   tools/slurm-cluster.sh status   sinfo (exit 1 when the cluster is not up)
#
# The node is called "localhost" in slurm.conf but slurmd runs in its own UTS namespace
# with hostname "node1", so jobs see a host name other than the submit host's (as on a
# real cluster). Two partitions on that one node: "debug" (default) and "other", to
# simulate two node types. No slurmdbd: no accounting, `sacct` does not work.
#
# Options for `up` (environment variables; the defaults mirror a plain cluster):
#   SLURM_FAKE_GPUS=N          give the node N "gpu" GRES backed by stand-in device files
#                              (/dev/fakegpuI, copies of /dev/null): --gres/--gpus requests are
#                              scheduled and CUDA_VISIBLE_DEVICES is set, but there is no GPU
#
# Exit status of `up`: 0 when the cluster is up, 3 (after ONE line on stdout starting
# with "SKIP:") when SLURM cannot be set up here (not root, no apt-get, no unshare), so a
# Makefile can skip SLURM tests; anything else is an error.
set -euo pipefail

SKIP_STATUS=3
CONF=/etc/slurm/slurm.conf          # must be this path: job steps drop SLURM_CONF
CTLD_PID=/run/slurmctld.pid
SLURMD_PID=/run/slurmd.pid
MUNGE_PID=/run/munge/munged.pid
NODE_HOSTNAME=${SLURM_NODE_HOSTNAME:-node1}
FAKE_GPUS=${SLURM_FAKE_GPUS:-0}
# job ids go on from where the last cluster stopped (the state is wiped at every up), so
# slurm-<id>.out files and .snakemake/slurm_logs/*/<id>.log of earlier runs are not reused
NEXT_JOBID_FILE=/var/lib/slurm-cluster.next-jobid

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }
log() { echo "slurm-cluster: $*"; }

# alive = exists and is not a zombie (an init that does not reap leaves zombies behind)
alive() {
  local st
  st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# pid from a pid file, only when that process is alive
live_pid() {
  local f=$1 p
  [ -s "$f" ] || return 1
  p=$(tr -dc 0-9 < "$f")
  [ -n "$p" ] && alive "$p" && { echo "$p"; return 0; }
  return 1
}

skip_reason() {
  if [ "$(id -u)" -ne 0 ]; then echo "not running as root (uid $(id -u))"; return; fi
  if ! command -v slurmctld >/dev/null 2>&1 && ! command -v apt-get >/dev/null 2>&1; then
    echo "slurm-wlm is not installed and apt-get is unavailable"; return; fi
  if ! command -v unshare >/dev/null 2>&1; then echo "unshare (util-linux) is missing"; return; fi
  if ! unshare --uts true 2>/dev/null; then echo "cannot create a UTS namespace (unshare --uts failed)"; return; fi
}

is_up() {
  live_pid "$CTLD_PID" >/dev/null && live_pid "$SLURMD_PID" >/dev/null \
    && timeout 10 sinfo -h >/dev/null 2>&1
}

install_pkgs() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
     && command -v munged >/dev/null && command -v sbatch >/dev/null; then
    log "slurm-wlm and munge already installed"
    return
  fi
  local t0; t0=$(now)
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -qq slurm-wlm munge >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    apt-get install -y -qq slurm-wlm munge >/dev/null
  fi
  log "installed slurm-wlm + munge in $(since "$t0") s"
}

start_munge() {
  [ -s /etc/munge/munge.key ] || mungekey --create --keyfile /etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key
  chmod 400 /etc/munge/munge.key
  install -d -o munge -g munge -m 755 /run/munge /var/log/munge /var/lib/munge
  if ! live_pid "$MUNGE_PID" >/dev/null; then
    rm -f "$MUNGE_PID" /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock
    runuser -u munge -- /usr/sbin/munged 9>&-
  fi
  munge -n | unmunge >/dev/null
}

write_conf() {
  local cpus mem gres="" first_jobid=1
  cpus=$(nproc)
  if [ -s "$NEXT_JOBID_FILE" ]; then first_jobid=$(tr -dc 0-9 < "$NEXT_JOBID_FILE"); fi
  [ -n "$first_jobid" ] || first_jobid=1
  mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
  case "$FAKE_GPUS" in ''|*[!0-9]*) echo "slurm-cluster: SLURM_FAKE_GPUS must be a number" >&2; exit 2 ;; esac
  if [ "$FAKE_GPUS" -gt 0 ]; then
    gres=" Gres=gpu:$FAKE_GPUS"
    # slurmd counts a gpu GRES only with device files behind it: stand-ins for /dev/null
    local i
    for i in $(seq 0 $((FAKE_GPUS - 1))); do
      [ -c "/dev/fakegpu$i" ] || mknod -m 666 "/dev/fakegpu$i" c 1 3
    done
    echo "Name=gpu File=/dev/fakegpu[0-$((FAKE_GPUS - 1))]" > /etc/slurm/gres.conf
  else
    rm -f /etc/slurm/gres.conf
  fi
  mem=$(( $(awk '/MemTotal/{print $2}' /proc/meminfo) / 1024 - 2048 ))
  [ "$mem" -gt 512 ] || mem=512
  cat > "$CONF" <<CONF
# written by tools/slurm-cluster.sh
ClusterName=local
SlurmctldHost=localhost
SlurmUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
MailProg=/bin/true
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
FirstJobId=$first_jobid
NodeName=localhost CPUs=$cpus RealMemory=$mem$gres State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
PartitionName=other Nodes=localhost MaxTime=INFINITE State=UP
CONF
  [ "$FAKE_GPUS" -gt 0 ] && echo "GresTypes=gpu" >> "$CONF"
  return 0
}

stop_pidfile() {  # stop_pidfile NAME PIDFILE: TERM, wait up to 20 s, then KILL
  local name=$1 f=$2 p i
  if p=$(live_pid "$f"); then
    kill "$p" 2>/dev/null || true
    for i in $(seq 1 200); do alive "$p" || break; sleep 0.1; done
    if alive "$p"; then
      log "$name (pid $p) still alive after 20 s, sending KILL"
      kill -9 "$p" 2>/dev/null || true
      for i in $(seq 1 50); do alive "$p" || break; sleep 0.1; done
    fi
    log "stopped $name (pid $p)"
  fi
  rm -f "$f"
}

cmd_up() {
  local why t0 t1
  why=$(skip_reason)
  if [ -n "$why" ]; then
    echo "SKIP: SLURM tests skipped: $why"
    exit "$SKIP_STATUS"
  fi
  if is_up; then
    log "already up (slurmctld pid $(live_pid "$CTLD_PID"), slurmd pid $(live_pid "$SLURMD_PID")); nothing to do (run down first to change options)"
    return 0
  fi
  t0=$(now)
  install_pkgs
  t1=$(now)
  # half-up (one daemon dead, or stale pid files): start from a clean slate
  stop_pidfile slurmd "$SLURMD_PID"
  stop_pidfile slurmctld "$CTLD_PID"
  start_munge
  write_conf
  # fresh state every time: no jobs or node state carried over from a previous run
  rm -rf /var/spool/slurmctld/* /var/spool/slurmd/*
  slurmctld 9>&-   # 9>&-: the daemons must not inherit the lock
  # the compute node under its own hostname, as on a real cluster
  unshare --uts sh -c "hostname $NODE_HOSTNAME; exec slurmd -N localhost" 9>&-
  if ! timeout 60 bash -c 'until sinfo -h -o %t 2>/dev/null | grep -qx idle; do sleep 0.5; done'; then
    log "error: node not idle after 60 s; see /var/log/slurm/slurmctld.log and slurmd.log" >&2
    sinfo >&2 || true
    exit 1
  fi
  local h
  h=$(timeout 60 srun -N1 -n1 hostname 9>&-)
  [ "$h" = "$NODE_HOSTNAME" ] || log "warning: srun hostname printed '$h', expected '$NODE_HOSTNAME'" >&2
  log "up: srun hostname -> $h; bring-up took $(since "$t1") s (total $(since "$t0") s)"
  sinfo
}

cmd_down() {
  local t0 next; t0=$(now)
  if live_pid "$CTLD_PID" >/dev/null; then
    next=$(timeout 10 scontrol show config 2>/dev/null | awk '$1 == "NEXT_JOB_ID" {print $3}') || true
    [ -z "$next" ] || echo "$next" > "$NEXT_JOBID_FILE"
  fi
  stop_pidfile slurmd "$SLURMD_PID"
  stop_pidfile slurmctld "$CTLD_PID"
  stop_pidfile munged "$MUNGE_PID"
  log "down in $(since "$t0") s"
}

cmd_status() {
  if is_up; then
    sinfo
    squeue 2>/dev/null || true
  else
    echo "slurm-cluster: not up"
    return 1
  fi
}

# one up/down at a time (the lock is released when this script exits)
lock() {
  [ "$(id -u)" -eq 0 ] || return 0
  exec 9>/run/slurm-cluster.lock
  flock -w 120 9 || { log "error: another up/down holds /run/slurm-cluster.lock" >&2; exit 1; }
}

case "${1:-}" in
  up) lock; cmd_up ;;
  down) lock; cmd_down ;;
  status) cmd_status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
