#!/usr/bin/env bash
# rxe/run.sh: run commands in a throwaway QEMU guest that has software RoCE (rdma_rxe) up, so that
# onesided's verbs path (libibverbs, librdmacm, libfabric's verbs provider) can be tested on a
# machine whose own kernel has no rdma_rxe. The guest boots the distribution kernel installed
# under /boot and uses this machine's root filesystem (read-only over 9p, writes kept in a tmpfs
# overlay), so binaries built here run there unchanged. rxe/README.md describes it in full.
#
# usage: rxe/run.sh [options] [--] 'command line' ['command line' ...]
#   Each argument is one shell command line, run by bash in the guest, in order, in the directory
#   run.sh was started from, with stdin /dev/null. Their output (stdout and stderr merged) is
#   printed as it comes, and after each one a line "rxe-vm: [N] exit RC (S s)". run.sh's own
#   lines go to stderr. Exit status: the last non-zero RC of the commands (0 when all passed),
#   124 when the guest ran past -t, 125 when the guest could not be set up (missing packages, no
#   kernel with rdma_rxe, boot, 9p, rxe0), 2 for a usage error, 128+N when run.sh got signal N.
# options:
#   -f FILE     add FILE's contents as one more command (a bash script)
#   -e VAR=VAL  set VAR in the guest's environment (repeatable; overrides the defaults below)
#   -w DIR      share DIR read-write, mounted at the same path (repeatable); everything else the
#               guest writes is lost when it powers off
#   -t SECONDS  kill the guest after this long in all (default 1800; env RXEVM_TIMEOUT)
#   -b SECONDS  fail with 125 if the guest is not up by then (default 300; env RXEVM_BOOT_TIMEOUT)
#   -m MEM      guest memory (default 2G; env RXEVM_MEM)
#   -c N        guest vCPUs (default 2; env RXEVM_CPUS)
#   -a CIDR     address of the rxe netdev in the guest (default 10.9.0.1/24; env RXEVM_ADDR)
#   -A ACCEL    tcg or kvm (default kvm only when kvm_intel or kvm_amd is loaded; env RXEVM_ACCEL)
#   -k          keep the job directory (console.log, commands) and say where it is
#   -v          verbose: kernel messages, a trace of the guest's setup, dmesg tail at the end
#   --install   apt-get install the Debian packages the guest needs (as root, or through sudo),
#               then go on with the commands, or exit 0 when there are none
#   --check     prepare everything a boot needs (kernel, modules, initramfs), do not boot; exit 0
#               or 125 with the reason
#   --clean     remove the work root (kernel cache, stale job dirs), then go on or exit 0
#   -h, --help  this text
# In the guest: ulimit -l unlimited; ONESIDED_RXE=1 exported; PATH
#   and HOME (and CARGO_HOME, RUSTUP_HOME when set) as here; rxe0 on netdev rxenet0, port ACTIVE.
# environment: RXEVM_WORK (work root: job dirs and the kernel cache; default /tmp/onesided-rxe),
#   RXEVM_KERNEL (a /boot kernel version to boot), RXEVM_BZIMAGE=1 (boot the bzImage rather than
#   the extracted vmlinux), RXEVM_KVM_CPU (-cpu under kvm, default host)
set -u
SELF=$(readlink -f "${BASH_SOURCE[0]}")

# ================================================================ guest side (PID 1 in the VM)
# The initramfs has mounted the root, /dev/pts, /dev/shm, /run and the -w shares, loaded the
# modules and created rxenet0; this brings rxe0 up and runs the commands. Under emulation each
# program started costs ~0.3 s, so this part uses builtins where it can.
if [[ ${1:-} == --guest ]]; then
  JOB=$2
  export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb LANG=C.UTF-8
  say() { echo "rxe-vm: $*"; }
  # power off without starting a program (the root filesystem goes away under it)
  off() { sync; echo o > /proc/sysrq-trigger; read -r -t 30 _ < /dev/console; exit 0; }
  die() { set +x; say "guest setup failed: $*"; echo 125 > "$JOB/rc"; off; }
  usec() { echo "${EPOCHREALTIME/./}"; }
  [[ -s $JOB/verbose ]] && { PS4='+ $(cut -d" " -f1 /proc/uptime) '; set -x; }
  addr=$(<"$JOB/addr")
  for m in rdma_rxe ib_uverbs rdma_ucm; do
    [[ -d /sys/module/$m ]] || modprobe "$m" || die "modprobe $m"
  done
  rdma link add rxe0 type rxe netdev rxenet0 || die "rdma link add rxe0 type rxe netdev rxenet0"
  state=
  for _ in {1..100}; do
    read -r state < /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null
    [[ $state == *ACTIVE* ]] && break
    sleep 0.1
  done
  [[ $state == *ACTIVE* ]] || die "rxe0 port 1 not ACTIVE after 10 s: '$state'"
  ulimit -l unlimited || die "ulimit -l unlimited"
  set +x
  read -r up _ < /proc/uptime
  read -r krel < /proc/sys/kernel/osrelease
  read -r cpus < /sys/devices/system/cpu/online
  if [[ $cpus == 0-* ]]; then cpus=$((${cpus#0-} + 1)); else cpus=1; fi
  say "guest up: rxe0 on rxenet0 ${addr%/*}, kernel $krel, $cpus vCPUs, $up s since boot"
  : > "$JOB/up"
  # what the tests look at, then the host's PATH and HOME and the -e variables (which may
  # override these two)
  export ONESIDED_RXE=1
  # shellcheck source=/dev/null
  . "$JOB/env"
  cd "$(<"$JOB/cwd")" 2>/dev/null || cd /
  last=0 n=0
  for f in "$JOB"/cmd.*; do
    [[ -e $f ]] || continue
    n=$((n + 1))
    t0=$(usec)
    bash "$f" < /dev/null
    rc=$?
    d=$((($(usec) - t0) / 100000))
    say "[$n] exit $rc ($((d / 10)).$((d % 10)) s)"
    [[ $rc -ne 0 ]] && last=$rc
  done
  [[ -s $JOB/verbose ]] && { say "dmesg tail:"; dmesg | tail -n 30; }
  echo "$last" > "$JOB/rc"
  off
fi

# ================================================================ host side
usage() { sed -n '/^# usage:/,/^set -u$/p' "$SELF" | sed '$d; s/^# \{0,1\}//'; }
log() { echo "rxe-vm: $*" >&2; }
usage_error() { log "$*"; log "rxe/run.sh -h lists the options"; exit 2; }
setup_failed() { log "setup failed: $*"; exit 125; }

WORK=${RXEVM_WORK:-/tmp/onesided-rxe}
MEM=${RXEVM_MEM:-2G} CPUS=${RXEVM_CPUS:-2} TIMEOUT=${RXEVM_TIMEOUT:-1800}
BOOT_TIMEOUT=${RXEVM_BOOT_TIMEOUT:-300} ADDR=${RXEVM_ADDR:-10.9.0.1/24} ACCEL=${RXEVM_ACCEL:-}
KEEP=0 VERBOSE=0 INSTALL=0 CHECK=0 CLEAN=0
RW=() ENVS=() CMDS=()
need_arg() { [[ $# -ge 2 ]] || usage_error "$1 needs an argument"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    -f) need_arg "$@"; [[ -f $2 && -r $2 ]] || usage_error "-f $2: not a readable file"
        CMDS+=("$(<"$2")"); shift 2;;
    -e) need_arg "$@"; [[ $2 =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || usage_error "-e takes VAR=VALUE, not '$2'"
        ENVS+=("$2"); shift 2;;
    -w) need_arg "$@"; [[ -d $2 ]] || usage_error "-w $2: not a directory"
        RW+=("$(readlink -f "$2")"); shift 2;;
    -t) need_arg "$@"; TIMEOUT=$2; shift 2;;
    -b) need_arg "$@"; BOOT_TIMEOUT=$2; shift 2;;
    -m) need_arg "$@"; MEM=$2; shift 2;;
    -c) need_arg "$@"; CPUS=$2; shift 2;;
    -a) need_arg "$@"; ADDR=$2; shift 2;;
    -A) need_arg "$@"; ACCEL=$2; shift 2;;
    -k) KEEP=1; shift;;
    -v) VERBOSE=1; shift;;
    --install) INSTALL=1; shift;;
    --check) CHECK=1; shift;;
    --clean) CLEAN=1; shift;;
    -h|--help) usage; exit 0;;
    --) shift; CMDS+=("$@"); break;;
    -*) usage_error "unknown option $1";;
    *) CMDS+=("$1"); shift;;
  esac
done
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || usage_error "-t takes whole seconds, not '$TIMEOUT'"
[[ $BOOT_TIMEOUT =~ ^[1-9][0-9]*$ ]] || usage_error "-b takes whole seconds, not '$BOOT_TIMEOUT'"
[[ $CPUS =~ ^[1-9][0-9]*$ ]] || usage_error "-c takes a number of vCPUs, not '$CPUS'"
[[ $ADDR =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+/[0-9]+$ ]] || usage_error "-a takes an IPv4 CIDR, not '$ADDR'"
[[ $WORK == /* && $WORK =~ ^[A-Za-z0-9/._-]+$ ]] \
  || usage_error "RXEVM_WORK must be an absolute path of plain characters (A-Za-z0-9/._-): $WORK"

# Job dirs are $WORK/job.XXXXXX; each holds the pid of the run.sh that owns it in "owner".
# A dir whose owner is gone (run.sh killed with SIGKILL) is stale, as is one older than a
# minute that never got an owner; a dir kept with -k is not.
stale() {
  local pid
  [[ -e $1/keep ]] && return 1
  pid=$(cat "$1/owner" 2> /dev/null) || { [[ -n $(find "$1" -maxdepth 0 -mmin +1) ]]; return; }
  ! kill -0 "$pid" 2> /dev/null
}
if [[ $CLEAN == 1 ]]; then
  if [[ -d $WORK ]]; then
    for j in "$WORK"/job.*; do
      [[ -d $j ]] || continue
      if [[ -e $j/keep ]] || stale "$j"; then rm -rf "$j"; else log "--clean: $j belongs to a running run.sh, left"; fi
    done
    rm -rf "$WORK/cache"
    rmdir "$WORK" 2>/dev/null
  fi
  if [[ -d $WORK ]]; then log "--clean: cleaned $WORK, but for the job dirs of running runs"
  else log "--clean: removed the work root $WORK"; fi
  [[ ${#CMDS[@]} -eq 0 && $INSTALL == 0 && $CHECK == 0 ]] && exit 0
fi

# Debian package names (Debian 12 is what the harness is tested on).
PKGS=(qemu-system-x86 linux-image-amd64 busybox-static kmod cpio xz-utils zstd binutils iproute2
      file util-linux rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest libfabric1
      libfabric-bin)
if [[ $INSTALL == 1 ]]; then
  SUDO=()
  if [[ $(id -u) != 0 ]]; then
    command -v sudo > /dev/null || setup_failed "--install needs root (or sudo)"
    SUDO=(sudo)
  fi
  log "--install: apt-get install ${PKGS[*]}"
  { "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
    && "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
         --no-upgrade "${PKGS[@]}"; } >&2 || setup_failed "apt-get install failed"
  [[ ${#CMDS[@]} -eq 0 && $CHECK == 0 ]] && exit 0
fi
[[ ${#CMDS[@]} -gt 0 || $CHECK == 1 ]] || { usage >&2; exit 2; }

# ---------------------------------------------------------------- what the host must have
for need in qemu-system-x86_64 busybox modinfo rdma ibv_devices timeout cpio gzip file; do
  command -v "$need" > /dev/null || setup_failed "$need not found: run rxe/run.sh --install"
done
file -L "$(command -v busybox)" | grep -q 'statically linked' \
  || setup_failed "busybox is not statically linked: install busybox-static (rxe/run.sh --install)"

# The guest kernel: the newest /boot/vmlinuz-* whose modules have rdma_rxe (or RXEVM_KERNEL).
KVER=${RXEVM_KERNEL:-}
if [[ -z $KVER ]]; then
  while read -r k; do
    [[ -n $(find "/lib/modules/$k" -name 'rdma_rxe.ko*' -print -quit 2>/dev/null) ]] && { KVER=$k; break; }
  done < <(find /boot -maxdepth 1 -name 'vmlinuz-*' -printf '%f\n' 2>/dev/null | sed 's/^vmlinuz-//' | sort -rV)
fi
[[ -n $KVER ]] || setup_failed "no /boot/vmlinuz-* with rdma_rxe under /lib/modules: install linux-image-amd64 (rxe/run.sh --install)"
[[ -r /boot/vmlinuz-$KVER ]] || setup_failed "/boot/vmlinuz-$KVER is missing or not readable"
modinfo -k "$KVER" -n rdma_rxe > /dev/null 2>&1 || setup_failed "modinfo finds no rdma_rxe for kernel $KVER"

if [[ -z $ACCEL ]]; then
  if [[ -w /dev/kvm ]] && [[ -d /sys/module/kvm_intel || -d /sys/module/kvm_amd ]]; then ACCEL=kvm; else ACCEL=tcg; fi
fi
case $ACCEL in
  kvm) ACCEL_ARGS=(-accel kvm -cpu "${RXEVM_KVM_CPU:-host}");;
  tcg) ACCEL_ARGS=(-accel tcg,thread=multi,tb-size=256 -cpu max);;
  *) usage_error "-A takes kvm or tcg, not '$ACCEL'";;
esac

# ---------------------------------------------------------------- the job dir and its cleanup
mkdir -p "$WORK" || setup_failed "cannot create the work root $WORK"
for j in "$WORK"/job.*; do [[ -d $j ]] && stale "$j" && rm -rf "$j"; done
JOB=$(mktemp -d "$WORK/job.XXXXXX") || setup_failed "cannot create a job dir under $WORK"
echo $$ > "$JOB/owner"
TPID= FPID= SPID= FIFO=$JOB/console.fifo

# Stop QEMU: SIGTERM to timeout's process group (timeout puts itself and QEMU in a group of
# their own), then SIGKILL whatever is left after 5 s. QEMU also dies by itself when timeout
# does, and timeout when run.sh does (setpriv --pdeathsig), so not even a SIGKILL of run.sh
# leaves a QEMU running; only its job dir stays, and the next run removes it.
stop_qemu() {
  [[ -n $TPID ]] || return 0
  kill -TERM -- "-$TPID" 2>/dev/null || kill -TERM "$TPID" 2>/dev/null
  for _ in {1..50}; do kill -0 "$TPID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- "-$TPID" 2>/dev/null; kill -KILL "$TPID" 2>/dev/null
  local q; q=$(cat "$JOB/qemu.pid" 2> /dev/null)
  [[ -n $q && $(cat "/proc/$q/comm" 2> /dev/null) == qemu-system* ]] && kill -KILL "$q" 2> /dev/null
  wait "$TPID" 2>/dev/null
  TPID=
}
cleanup() {
  trap - INT TERM HUP
  [[ -n $SPID ]] && kill "$SPID" 2>/dev/null
  stop_qemu
  if [[ -n $FPID ]]; then
    # a console reader still blocked opening the FIFO gets a writer and then end of file
    [[ -p $FIFO ]] && { exec 3<> "$FIFO"; exec 3>&-; }
    wait "$FPID" 2>/dev/null
  fi
  if [[ $KEEP == 1 ]]; then
    rm -f "$FIFO"; : > "$JOB/keep"; log "job dir kept: $JOB (console.log, cmd.*; rm -rf it when done)"
  else
    rm -rf "$JOB"
  fi
}
on_signal() { log "got SIG$1: stopping the guest"; exit "$2"; }
trap cleanup EXIT
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
trap 'on_signal HUP 129' HUP

[[ $JOB =~ ^[A-Za-z0-9/._-]+$ ]] || setup_failed "job dir path must be plain characters: $JOB"
cp "$SELF" "$JOB/run.sh" || setup_failed "cannot write $JOB"
echo "$ADDR" > "$JOB/addr"
pwd > "$JOB/cwd"
[[ $VERBOSE == 1 ]] && echo 1 > "$JOB/verbose"
{ printf 'export PATH=%q HOME=%q\n' "$PATH:/usr/sbin:/sbin" "${HOME:-/root}"
  for v in CARGO_HOME RUSTUP_HOME; do [[ -n ${!v:-} ]] && printf 'export %s=%q\n' "$v" "${!v}"; done
  for e in ${ENVS[@]+"${ENVS[@]}"}; do printf 'export %s=%q\n' "${e%%=*}" "${e#*=}"; done
} > "$JOB/env"
i=0
for c in ${CMDS[@]+"${CMDS[@]}"}; do i=$((i + 1)); printf '%s\n' "$c" > "$JOB/cmd.$(printf %03d "$i")"; done
: > "$JOB/mounts"
VIRTFS=(-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
        -virtfs "local,path=$JOB,mount_tag=job,security_model=none")
i=0
for d in ${RW[@]+"${RW[@]}"}; do
  [[ $d =~ ^[A-Za-z0-9/._-]+$ ]] || usage_error "-w $d: the path must be plain characters (A-Za-z0-9/._-)"
  VIRTFS+=(-virtfs "local,path=$d,mount_tag=rw$i,security_model=none")
  echo "rw$i $d" >> "$JOB/mounts"; i=$((i + 1))
done

# ---------------------------------------------------------------- the kernel
# QEMU boots the ELF vmlinux directly (PVH entry) when it can: under TCG that skips ~5 s of
# emulated decompression. It is extracted once per kernel into $WORK/cache (~65 MB).
vmlinux() {
  local bz=/boot/vmlinuz-$KVER out=$WORK/cache/vmlinux-$KVER tmp magic off dec
  [[ -s $out && $out -nt $bz ]] && { echo "$out"; return 0; }
  mkdir -p "$WORK/cache" || return 1
  tmp=$(mktemp "$out.XXXXXX") || return 1
  for magic in 'xz:\xfd7zXZ\x00' 'zstd:\x28\xb5\x2f\xfd' 'gzip:\x1f\x8b\x08'; do
    dec=${magic%%:*}
    command -v "$dec" > /dev/null || continue
    for off in $(LC_ALL=C grep -obUaP "${magic#*:}" "$bz" 2>/dev/null | cut -d: -f1 | head -3); do
      tail -c +$((off + 1)) "$bz" | "$dec" -dc > "$tmp" 2>/dev/null
      # an ELF with the Xen PVH entry note (type 0x12) is what QEMU's -kernel boots directly
      if [[ $(head -c 4 "$tmp" | od -An -tx1 | tr -d ' ') == 7f454c46 ]] \
         && readelf -n "$tmp" 2>/dev/null | grep -q 'note type: (0x00000012)'; then
        mv -f "$tmp" "$out" && { echo "$out"; return 0; }
      fi
    done
  done
  rm -f "$tmp"; return 1
}
KERNEL=/boot/vmlinuz-$KVER
if [[ ${RXEVM_BZIMAGE:-0} != 1 ]] && command -v readelf > /dev/null; then
  KERNEL=$(vmlinux) || { KERNEL=/boot/vmlinuz-$KVER; log "no PVH vmlinux in $KERNEL: booting the bzImage (slower)"; }
fi

# ---------------------------------------------------------------- the initramfs
# busybox and the modules (dependencies first) for the 9p root under an overlay, the dummy
# netdev and rxe; loaded from the initramfs, which is faster than modprobe over 9p.
IR=$JOB/initrd
mkdir -p "$IR"/{bin,proc,sys,dev,lower,rw,newroot,mods} || setup_failed "cannot write $IR"
cp "$(command -v busybox)" "$IR/bin/busybox" || setup_failed "cannot copy busybox"
declare -A SEEN=()
LOAD=
add_mod() {
  local m=$1 f d
  [[ -n ${SEEN[$m]:-} ]] && return 0
  SEEN[$m]=1
  f=$(modinfo -k "$KVER" -n "$m" 2>/dev/null) || return 0     # absent, or built in
  [[ $f == /* ]] || return 0
  for d in $(modinfo -k "$KVER" -F depends "$m" 2>/dev/null | tr ',' ' '); do add_mod "$d" || return 1; done
  case $f in
    *.xz) xz -dc "$f" > "$IR/mods/$m.ko";;
    *.zst) zstd -qdc "$f" > "$IR/mods/$m.ko";;
    *.gz) gzip -dc "$f" > "$IR/mods/$m.ko";;
    *) cp "$f" "$IR/mods/$m.ko";;
  esac || return 1
  LOAD+="$m "
}
for m in virtio_pci 9pnet_virtio 9p overlay dummy rdma_rxe ib_uverbs rdma_ucm; do
  add_mod "$m" || setup_failed "cannot copy module $m of kernel $KVER (xz/zstd missing?)"
done
cat > "$IR/init" <<INIT
#!/bin/busybox sh
/bin/busybox mkdir -p /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
exec </dev/console >/dev/console 2>&1
fail() { echo "rxe-vm: guest setup failed (initramfs): \$*"; echo 125 > /newroot\$job/rc 2>/dev/null; poweroff -f; sleep 30; }
for m in $LOAD; do
  a=; [ \$m = dummy ] && a=numdummies=0
  insmod /mods/\$m.ko \$a || echo "rxe-vm: initramfs: insmod \$m failed"
done
job=
for a in \$(cat /proc/cmdline); do case "\$a" in rxevm.job=*) job=\${a#rxevm.job=};; esac; done
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro hostroot /lower || fail "9p mount of the host root"
mount -t tmpfs -o size=75% tmpfs /rw && mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /newroot || fail "overlay mount"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=none job /newroot\$job || fail "9p mount of \$job"
R=/newroot
for d in proc sys dev; do mount --move /\$d \$R/\$d || fail "move /\$d"; done
mkdir -p \$R/dev/pts \$R/dev/shm
mount -t devpts -o gid=5,mode=620 devpts \$R/dev/pts
mount -t tmpfs -o mode=1777 tmpfs \$R/dev/shm
mount -t tmpfs -o mode=755 tmpfs \$R/run
# cgroup v1 hierarchies, which slurmd needs (the suite starts a one-node Slurm cluster in the
# guest too; its cgroup v2 plugin would want systemd's dbus, which the guest does not run)
mount -t tmpfs -o mode=755 cgroup \$R/sys/fs/cgroup
for c in cpu cpuacct cpuset memory devices freezer pids; do
  mkdir -p \$R/sys/fs/cgroup/\$c && mount -t cgroup -o \$c cgroup \$R/sys/fs/cgroup/\$c \
    || echo "rxe-vm: no cgroup \$c: slurmd may not start"
done
mkdir -p \$R/sys/fs/cgroup/systemd && mount -t cgroup -o none,name=systemd cgroup \$R/sys/fs/cgroup/systemd \
  || echo "rxe-vm: no cgroup name=systemd: slurmd may not start"
ln -sf /proc/self/fd \$R/dev/fd
while read -r tag path; do
  [ -n "\$tag" ] || continue
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=none "\$tag" "\$R\$path" || fail "9p mount of \$path"
done < \$R\$job/mounts
stty -F \$R/dev/console -onlcr
hostname rxevm
addr=\$(cat \$R\$job/addr)
echo "\${addr%/*} rxevm" >> \$R/etc/hosts
ip link set lo up
ip link add rxenet0 type dummy && ip addr add "\$addr" dev rxenet0 && ip link set rxenet0 up || fail "netdev rxenet0 with \$addr"
exec switch_root /newroot /bin/bash \$job/run.sh --guest \$job
INIT
chmod +x "$IR/init"
(cd "$IR" && find . | cpio -o -H newc 2> /dev/null | gzip -1) > "$JOB/initrd.gz" || setup_failed "initramfs build failed"
rm -rf "$IR"
if [[ $CHECK == 1 ]]; then
  log "--check: ready to boot kernel $KVER (${KERNEL##*/}, $ACCEL), modules: $LOAD"
  [[ ${#CMDS[@]} -eq 0 ]] && exit 0
fi

# ---------------------------------------------------------------- boot and wait
LOGLEVEL=1; [[ $VERBOSE == 1 ]] && LOGLEVEL=7
BIOS=(); [[ -r /usr/share/qemu/qboot.rom ]] && BIOS=(-bios /usr/share/qemu/qboot.rom)
PDEATH=(); setpriv --pdeathsig KILL true 2> /dev/null && PDEATH=(setpriv --pdeathsig KILL)
# The guest's serial console is QEMU's stdout, read through a FIFO: copied to console.log and
# printed, less the two lines the kernel prints at power-off whatever the log level.
mkfifo "$FIFO" || setup_failed "mkfifo $FIFO"
if [[ $VERBOSE == 1 ]]; then
  tee "$JOB/console.log" < "$FIFO" &
else
  tee "$JOB/console.log" < "$FIFO" \
    | grep --line-buffered -v -E '^\[ *[0-9.]+\] (sysrq: Power Off|reboot: Power down)[[:space:]]*$' &
fi
FPID=$!
log "booting kernel $KVER (${KERNEL##*/}, $ACCEL, $CPUS vCPUs, $MEM), job $JOB"
T0=${EPOCHREALTIME/./}
# no -netdev/-nic and -nodefaults: the guest has no network device connected to this machine
"${PDEATH[@]}" timeout -k 10 "$TIMEOUT" "${PDEATH[@]}" qemu-system-x86_64 "${ACCEL_ARGS[@]}" \
  -smp "$CPUS" -m "$MEM" -M pc -nodefaults -no-user-config -display none -no-reboot "${BIOS[@]}" \
  -kernel "$KERNEL" -initrd "$JOB/initrd.gz" \
  -append "console=ttyS0 loglevel=$LOGLEVEL edd=off panic=-1 rxevm.job=$JOB" \
  -serial stdio -monitor none -pidfile "$JOB/qemu.pid" "${VIRTFS[@]}" < /dev/null > "$FIFO" &
TPID=$!
secs() { local d=$(((${EPOCHREALTIME/./} - $1) / 100000)); echo "$((d / 10)).$((d % 10))"; }

# Until the guest says it is up (the file "up" in the job dir), watch the boot deadline.
BOOTFAIL=0 UPAT=
while kill -0 "$TPID" 2> /dev/null; do
  [[ -e $JOB/up ]] && { UPAT=$(secs "$T0"); break; }
  if (((${EPOCHREALTIME/./} - T0) / 1000000 >= BOOT_TIMEOUT)); then BOOTFAIL=1; break; fi
  sleep 0.5 & SPID=$!
  wait "$SPID"; SPID=
done
if [[ $BOOTFAIL == 1 ]]; then
  stop_qemu
  setup_failed "the guest was not up after ${BOOT_TIMEOUT}s (-b; rerun with -v -k to see the kernel's messages)"
fi
wait "$TPID"; QRC=$?
TPID=
[[ -z $UPAT && -e $JOB/up ]] && UPAT=$(secs "$T0")
wait "$FPID"; FPID=
WALL=$(secs "$T0")
if [[ $QRC -eq 124 || $QRC -eq 137 ]]; then
  log "timed out: guest killed after ${TIMEOUT}s (-t)${UPAT:+, it was up after ${UPAT}s}"
  exit 124
fi
if [[ ! -s $JOB/rc ]]; then
  if [[ -n $UPAT ]]; then
    setup_failed "the guest stopped without a result (qemu exit $QRC, wall ${WALL}s); rerun with -v -k to see the console"
  fi
  setup_failed "the guest did not come up (qemu exit $QRC, wall ${WALL}s); rerun with -v -k to see the console"
fi
RC=$(cat "$JOB/rc")
if [[ $RC == 125 && -z $UPAT ]]; then setup_failed "the guest's setup failed (see its line above)"; fi
log "guest done: exit $RC, wall ${WALL}s, up after ${UPAT:-?}s"
exit "$RC"
