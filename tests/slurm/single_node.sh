#!/usr/bin/env bash
# A private single-node Slurm cluster in a folder of its own, for tests:
#   tests/slurm/single_node.sh start DIR   # munged, slurmctld and slurmd; prints DIR/env
#   tests/slurm/single_node.sh stop DIR    # stops exactly the daemons `start` wrote PIDs for
# `source DIR/env` then points sbatch/squeue/sinfo (SLURM_CONF) at it. Needs root (slurmd runs
# jobs as their submitter) and Debian's slurmctld, slurmd, slurm-client and munge (scripts/setup.sh);
# no systemd: the daemons are started here, by PID file, and nothing outside DIR is written.
# Ports are chosen free at start, so two clusters (or a system one) do not collide.
set -euo pipefail
cmd="${1:-}"
dir="${2:-}"
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

stop() {
  local pidfile pid
  # Jobs first, so no slurmstepd (and no job's processes) outlive the daemons.
  if [ -s "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; then
    SLURM_CONF="$dir/slurm.conf" scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 100); do
      [ -z "$(SLURM_CONF="$dir/slurm.conf" squeue -h 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
    [ -s "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
}

if [ "$cmd" = stop ]; then stop; exit 0; fi
[ "$cmd" = start ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

[ "$(id -u)" -eq 0 ] || { echo "single_node.sh: must run as root (slurmd starts jobs as their user)" >&2; exit 1; }
for tool in munged slurmctld slurmd sbatch sinfo; do
  command -v "$tool" >/dev/null || { echo "single_node.sh: $tool not found (scripts/setup.sh installs Slurm and munge)" >&2; exit 1; }
done

dir=$(mkdir -p "$dir" && cd "$dir" && pwd)
trap 'echo "single_node.sh: start failed; logs in $dir" >&2; stop' ERR

# munge: its own key and socket, owned by the munge user, in a folder only it can read
# (munged refuses group/world-writable folders on the way to its files).
chmod 755 "$dir"
mkdir -p "$dir/munge"
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chown -R munge:munge "$dir/munge"
chmod 711 "$dir/munge"   # clients need to reach the socket; nothing is listable
chmod 400 "$dir/munge/munge.key"
runuser -u munge -- munged --socket="$dir/munge/munge.sock" --key-file="$dir/munge/munge.key" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed"

free_port() {  # a TCP port nothing listens on now
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
node=$(hostname -s)
cpus=$(nproc)
mkdir -p "$dir/state" "$dir/spool"
cat > "$dir/slurm.conf" <<CONF
# Written by tests/slurm/single_node.sh: a one-node cluster private to $dir.
ClusterName=altgradtest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
KillWait=30
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
echo "export SLURM_CONF=$dir/slurm.conf" > "$dir/env"
export SLURM_CONF="$dir/slurm.conf"
slurmctld -f "$dir/slurm.conf"
slurmd -f "$dir/slurm.conf"
# Up when the node is idle (a first sinfo may come before slurmd registered).
for _ in $(seq 100); do
  state=$(sinfo -h -n "$node" -o '%t' 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.2
done
[ "$state" = idle ] || { echo "single_node.sh: node $node is '${state:-unknown}', not idle, after 20 s" >&2; false; }
trap - ERR
echo "$dir/env"
