#!/usr/bin/env bash
# Single-node Slurm testbed for corral's Slurm backend tests (Debian 12, run as root, no systemd).
#
#   scripts/slurm-testbed.sh [start|stop|status]     (default: start)
#
# start: installs slurm-wlm, slurmdbd and munge if missing, writes /etc/slurm/{slurm,gres,slurmdbd}.conf
#        (one node named `hostname -s`, CPUs=nproc, 4 fake GPUs on /dev/fakegpu[0-3], partitions
#        debug (default) and gpu), starts munged, slurmdbd, slurmctld and slurmd as plain daemons,
#        resumes the node if it is down/drained and waits until a trivial job completes.
#        Idempotent: already running daemons are kept (restarted only when a config file changed).
# stop:  stops slurmd (and job steps), slurmctld, slurmdbd and munged.
# status: one line per daemon, plus sinfo.
#
# Environment:
#   CORRAL_SLURM_ACCOUNTING  auto (default: slurmdbd on MariaDB/MySQL when reachable, else none),
#                            slurmdbd (fail if it cannot be set up) or none.
#   CORRAL_SLURM_MYSQL       mysql client arguments for an admin account (default: -h127.0.0.1 -P3306 -uroot)
#   CORRAL_SLURM_GPUS        number of fake GPUs (default 4)
#   CORRAL_SLURM_CPUS        CPUs of the node (default nproc; more than nproc sets SlurmdParameters=config_overrides)
# Findings about the testbed's behaviour (output formats, states, timings): docs/slurm-testbed.md.
set -euo pipefail

CMD="${1:-start}"
CLUSTER=corral
NODE="$(hostname -s)"
GPUS="${CORRAL_SLURM_GPUS:-4}"
ACCOUNTING="${CORRAL_SLURM_ACCOUNTING:-auto}"
MYSQL_ADMIN="${CORRAL_SLURM_MYSQL:--h127.0.0.1 -P3306 -uroot}"
DB_NAME=slurm_acct_db
DB_USER=slurm
DB_PASS=corral-slurmdbd
ETC=/etc/slurm
LOGDIR=/var/log/slurm
# corral's epilog: tells the corral server named in /etc/corral/epilog.env that a job ended
EPILOG="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/slurm-epilog.sh"
T0=$SECONDS

log() { echo "slurm-testbed: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Live (non-zombie) pids of processes whose command name is exactly $1.
pids_of() {
  local p st
  for p in $(pgrep -x "$1" 2>/dev/null || true); do
    st="$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null || true)"
    [ -n "$st" ] && [ "$st" != Z ] && echo "$p"
  done
  return 0
}
running() { [ -n "$(pids_of "$1")" ]; }

kill_wait() {  # kill_wait NAME...: SIGTERM, wait up to 10 s, then SIGKILL
  local name pids i
  for name in "$@"; do
    pids="$(pids_of "$name")"
    [ -z "$pids" ] && continue
    kill $pids 2>/dev/null || true
    for i in $(seq 100); do running "$name" || break; sleep 0.1; done
    pids="$(pids_of "$name")"
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null || true
  done
  return 0
}

stop_slurm() { kill_wait slurmd slurmstepd slurmctld slurmdbd; }
# For a config change: job steps (slurmstepd) keep running and reconnect to the new slurmd.
restart_slurm() { kill_wait slurmd slurmctld slurmdbd; }

status() {
  local d
  for d in munged slurmdbd slurmctld slurmd; do
    if running "$d"; then echo "$d: running (pid $(pids_of "$d" | tr '\n' ' ' | sed 's/ $//'))"
    else echo "$d: stopped"; fi
  done
  if running slurmctld; then sinfo 2>&1 || true; fi
}

case "$CMD" in
  start) ;;
  stop) stop_slurm; kill_wait munged; log "stopped"; exit 0 ;;
  status) status; running slurmctld && running slurmd; exit $? ;;
  *) echo "usage: $0 [start|stop|status]" >&2; exit 2 ;;
esac

[ "$(id -u)" = 0 ] || die "must run as root"

# ---------------------------------------------------------------- install
need=()
command -v slurmctld >/dev/null || need+=(slurmctld)
command -v slurmd >/dev/null || need+=(slurmd)
command -v sbatch >/dev/null || need+=(slurm-client)
[ -e /usr/lib/x86_64-linux-gnu/slurm-wlm/select_cons_tres.so ] || need+=(slurm-wlm)
command -v munged >/dev/null || need+=(munge)
if [ "$ACCOUNTING" != none ]; then
  command -v slurmdbd >/dev/null || need+=(slurmdbd)
  command -v mysql >/dev/null || need+=(mariadb-client)
fi
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  t=$SECONDS
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/tmp/slurm-testbed-apt.log 2>&1 \
    || { tail -20 /tmp/slurm-testbed-apt.log >&2; die "apt-get install failed"; }
  log "installed in $((SECONDS - t)) s"
fi

# ---------------------------------------------------------------- munge
if [ ! -s /etc/munge/munge.key ]; then
  install -d -o munge -g munge -m 0700 /etc/munge
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
install -d -o munge -g munge -m 0755 /run/munge
install -d -o munge -g munge -m 0700 /var/log/munge /var/lib/munge
if ! running munged; then
  rm -f /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock
  runuser -u munge -- /usr/sbin/munged
fi
for i in $(seq 50); do munge -n </dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
munge -n </dev/null | unmunge >/dev/null 2>&1 || die "munged does not work"

# ---------------------------------------------------------------- accounting database
# A local MariaDB/MySQL server that is installed but stopped (a machine after a reboot, a session that lost its
# daemons) is started: without it the testbed would come up without accounting, and every finished job would
# read as COMPLETED with no exit code.
# shellcheck disable=SC2086
mysql_up() { mysql $MYSQL_ADMIN -e 'SELECT 1' >/dev/null 2>&1; }
start_local_mysql() {
  local name
  for name in mariadb mysql; do
    [ -x "/etc/init.d/$name" ] || continue
    log "MySQL/MariaDB not reachable: starting the local $name server"
    service "$name" start >/dev/null 2>&1 || true
    for i in $(seq 100); do mysql_up && return 0; sleep 0.1; done
  done
  return 1
}
use_dbd=0
if [ "$ACCOUNTING" != none ]; then
  mysql_up || start_local_mysql || true
  # shellcheck disable=SC2086
  if mysql_up; then
    # shellcheck disable=SC2086
    mysql $MYSQL_ADMIN <<SQL
CREATE DATABASE IF NOT EXISTS $DB_NAME;
CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
CREATE USER IF NOT EXISTS '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON $DB_NAME.* TO '$DB_USER'@'localhost';
GRANT ALL ON $DB_NAME.* TO '$DB_USER'@'127.0.0.1';
SQL
    use_dbd=1
  elif [ "$ACCOUNTING" = slurmdbd ]; then
    die "cannot reach MySQL/MariaDB with: mysql $MYSQL_ADMIN"
  else
    log "MySQL/MariaDB not reachable (mysql $MYSQL_ADMIN): running without accounting"
  fi
fi

# ---------------------------------------------------------------- config
install -d -m 0755 "$ETC" "$LOGDIR" /var/spool/slurmctld /var/spool/slurmd
for ((i = 0; i < GPUS; i++)); do
  [ -c "/dev/fakegpu$i" ] || { rm -f "/dev/fakegpu$i"; mknod -m 0666 "/dev/fakegpu$i" c 1 3; }
done
NCPU="$(nproc)"
CPUS="${CORRAL_SLURM_CPUS:-$NCPU}"
OVERRIDES=""
# More CPUs than the machine has (to run more jobs at once): slurmd must not check the hardware.
[ "$CPUS" -gt "$NCPU" ] && OVERRIDES="SlurmdParameters=config_overrides"
MEM_MB=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 ))
REAL_MEM=$(( MEM_MB - (MEM_MB / 10 > 512 ? MEM_MB / 10 : 512) ))
DEF_MEM=$(( REAL_MEM / CPUS < 1024 ? REAL_MEM / CPUS : 1024 ))
if [ "$use_dbd" = 1 ]; then
  ACCT_LINES="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819"
else
  ACCT_LINES="AccountingStorageType=accounting_storage/none"
fi

changed=0
write_conf() {  # write_conf PATH MODE CONTENT: rewrite only if different, set changed=1
  if [ "$(cat "$1" 2>/dev/null)" != "$3" ]; then
    printf '%s\n' "$3" >"$1"
    changed=1
  fi
  chown root:root "$1"
  chmod "$2" "$1"
}

write_conf "$ETC/slurm.conf" 0644 "# Written by corral scripts/slurm-testbed.sh; edits are overwritten.
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=cred_expire=10
CredType=cred/munge
MpiDefault=none
MailProg=/bin/true
EpilogSlurmctld=$EPILOG
SwitchType=switch/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$DEF_MEM
GresTypes=gpu
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=1,batch_sched_delay=0,sched_min_interval=0
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
MessageTimeout=5
InactiveLimit=0
KillWait=2
MinJobAge=30
OverTimeLimit=0
JobRequeue=1
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
$OVERRIDES
$ACCT_LINES
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobCompType=jobcomp/none
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$REAL_MEM Gres=gpu:$GPUS State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$NODE MaxTime=INFINITE State=UP"

write_conf "$ETC/gres.conf" 0644 "AutoDetect=off
Name=gpu File=/dev/fakegpu[0-$((GPUS - 1))]"

# Debian's slurm packages look for cgroup.conf only with cgroup plugins; none are used here.
if [ "$use_dbd" = 1 ]; then
  write_conf "$ETC/slurmdbd.conf" 0600 "# Written by corral scripts/slurm-testbed.sh; edits are overwritten.
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=root
DebugLevel=info
LogFile=$LOGDIR/slurmdbd.log
PidFile=/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=3306
StorageUser=$DB_USER
StoragePass=$DB_PASS
StorageLoc=$DB_NAME"
fi

if [ "$changed" = 1 ] && { running slurmctld || running slurmd || running slurmdbd; }; then
  log "configuration changed: restarting the Slurm daemons"
  restart_slurm
fi
if [ "$use_dbd" = 0 ] && running slurmdbd; then kill_wait slurmdbd; fi

# ---------------------------------------------------------------- daemons
started=0
if [ "$use_dbd" = 1 ]; then
  running slurmdbd || { /usr/sbin/slurmdbd || true; started=1; }
  ok=0
  for i in $(seq 300); do
    if sacctmgr -n -P list cluster format=cluster >/dev/null 2>&1; then ok=1; break; fi
    running slurmdbd || break
    sleep 0.1
  done
  [ "$ok" = 1 ] || { tail -20 "$LOGDIR/slurmdbd.log" >&2; die "slurmdbd did not come up"; }
  if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
    sacctmgr -i add cluster "$CLUSTER" >/dev/null
  fi
fi

# slurmctld: start it (again, if a running one was just exiting) until `scontrol ping` answers.
for i in $(seq 300); do
  if ! running slurmctld; then
    started=1
    /usr/sbin/slurmctld || { tail -20 "$LOGDIR/slurmctld.log" >&2; die "slurmctld failed to start"; }
  fi
  scontrol ping >/dev/null 2>&1 && break
  sleep 0.1
done
scontrol ping >/dev/null 2>&1 || { tail -20 "$LOGDIR/slurmctld.log" >&2; die "slurmctld does not answer"; }

if ! running slurmd; then
  started=1
  /usr/sbin/slurmd || { tail -20 "$LOGDIR/slurmd.log" >&2; die "slurmd failed to start"; }
fi

# Wait for the node to be usable; resume it if it is down or drained (e.g. after a config change).
state=""
for i in $(seq 300); do
  state="$(sinfo -h -n "$NODE" -o %T 2>/dev/null | head -1)"
  case "$state" in
    idle|mixed|allocated|completing) break ;;
    "") running slurmd || { started=1; /usr/sbin/slurmd || true; } ;;
    down|drained|draining|drain|fail|failing|inval)
      scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true ;;
  esac
  sleep 0.1
done
case "$state" in
  idle|mixed|allocated|completing) ;;
  *) scontrol show node "$NODE" >&2 || true; tail -20 "$LOGDIR/slurmd.log" >&2
     die "node $NODE is '$state', not idle" ;;
esac

# Smoke test after (re)starting a daemon: a trivial job must run to completion. Skipped when all was
# already up, so that a second `start` is instant even while the node is busy with other jobs.
if [ "$started" = 1 ] && ! timeout 60 srun --quiet --job-name=testbed-smoke --time=1 true; then
  die "a trivial srun job did not complete (see $LOGDIR/slurmctld.log)"
fi

acct=none
[ "$use_dbd" = 1 ] && acct=slurmdbd
echo "slurm-testbed: up in $((SECONDS - T0)) s: cluster $CLUSTER, node $NODE (CPUs=$CPUS RealMemory=${REAL_MEM}M gpu:$GPUS), partitions debug*,gpu, accounting $acct"
