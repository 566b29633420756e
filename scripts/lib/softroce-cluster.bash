# scripts/lib/softroce-cluster.bash: several soft-RoCE guests on one virtual
# wire (`scripts/softroce cluster`), and the commands a cluster's hosts use
# on each other from inside it (`on`, `agent`, `wire`, `power-off`). Sourced
# by scripts/softroce, which defines info, die, usage_error, $caller_env and
# the guest library.
#
# Layout on this machine, under one run directory:
#   hub.sock            the wire (scripts/softroce-wire), which every guest's
#                       -netdev dgram NIC sends its frames to
#   hN.sock, hN/        guest N's end of the wire and its ctl share
#   shared/             mounted in every guest at $SOFTROCE_CLUSTER_DIR:
#     ready/hN          guest N is up (device ACTIVE, agent running)
#     jobs/hN/          commands other hosts asked hN to run (`on`)
#     requests/         faults asked of this machine: unplug-, plug-, power-off-
#     wire-stats        the wire's frame counts per host (scripts/softroce-wire)
#     stop              the cluster is ending: peers-only hosts exit

readonly CLUSTER_SUBNET=10.98.0 CLUSTER_PREFIX=24
readonly CLUSTER_MAX_HOSTS=8

cluster_usage() {
	cat <<'EOF'
Usage (on this machine):
  scripts/softroce cluster [--hosts N] [--on HOSTS] [--slurm] [--netdev-mtu HOST=MTU]...
                           [--out DIR]... [--logs DIR] [--timeout SECS]
                           [--mem MB] [--cpus N] [--clock tsc|hpet] [--] CMD [ARG]...

Boots N guests (default 2, at most 8), h1 .. hN, each with Debian's kernel,
its own virtio NIC on one virtual Ethernet wire (scripts/softroce-wire, over
unix sockets of this machine only), its own address 10.98.0.N/24 and
hostname hN (in every guest's /etc/hosts), and its own rxe0 on that NIC.
CMD runs on every host, or only on those --on names (a comma list); the
others are peers that serve the rest. CMD starts once every host is up.

Each host's stdout and stderr are streamed with a "hN| " prefix. The cluster
ends when every host running CMD has ended; a host whose CMD fails, or whose
guest dies (a kernel panic is noticed at once), ends it at once and the others
are stopped. Exit status: 0 when every CMD exited 0; else the first failing
host's status (124 timeout; 125 when a guest died or could not boot), with one
line per host saying how it ended.

CMD gets, besides what `scripts/softroce run` gives (RDMA_BENCH_DEVICE=rxe0,
RDMA_BENCH_IPV4 = its own address):
  SOFTROCE_HOST          this host's name (h1 .. hN)
  SOFTROCE_HOSTS         every host as NAME=ADDRESS, space-separated
  SOFTROCE_CLUSTER_DIR   a directory every host shares

Options:
  --hosts N              number of guests (2 .. 8)
  --on HOSTS             where CMD runs (default: every host)
  --slurm                a Slurm across the hosts: munged and slurmd on each,
                         slurmctld on h1 (this machine's munge key; state,
                         spool and logs under /run/slurm, on tmpfs). CMD starts
                         once sinfo shows every node idle, with SLURM_CONF set
                         and Open MPI told to use TCP over eth0 only, as root
                         (OMPI_MCA_*, OMPI_ALLOW_RUN_AS_ROOT*). A Slurm that
                         does not come up ends the cluster (status 125),
                         naming what did not start, with its log's tail.
  --netdev-mtu HOST=MTU  that host's NIC MTU (default 1500; rxe's active MTU
                         follows it: 1500 gives 1024, 1000 gives 512)
  --out DIR              (repeatable) writable in every guest, kept on this machine
  --logs DIR             keep each host's stdout, stderr and console as DIR/hN.*
  --timeout SECS         give up after SECS (boots included), exit 124. Default 3600.
  --mem MB               memory per guest (default 1024)
  --cpus N               vCPUs per guest (default 1: two cores serve all guests)
  --clock C              as for `scripts/softroce run`

From inside a cluster's host:
  scripts/softroce on HOST [--timeout SECS] [--] CMD [ARG]...
        runs CMD on HOST (in this working directory and HOST's environment)
        and exits with its status; its stdout and stderr are printed after it ends
  scripts/softroce on HOST --bg NAME [--] CMD [ARG]...
        starts CMD on HOST in the background as job NAME (output in
        $SOFTROCE_CLUSTER_DIR/jobs/HOST/NAME.out and .err)
  scripts/softroce on HOST --wait NAME [--timeout SECS]
  scripts/softroce on HOST --kill NAME [--signal SIG] [--timeout SECS]
        waits for job NAME (after signalling it) and exits with its status
  scripts/softroce wire unplug|plug HOST
        cuts HOST's cable on the wire (every frame from or to it dropped) or mends it
  scripts/softroce power-off HOST
        kills HOST's guest at once, as a power failure would
EOF
}

# ---------------------------------------------------------------------------
# Inside a cluster host
# ---------------------------------------------------------------------------
in_cluster() {
	[[ -n ${SOFTROCE_CLUSTER_DIR:-} && -d ${SOFTROCE_CLUSTER_DIR:-}/jobs ]] ||
		usage_error "'$1' works inside a host of scripts/softroce cluster only"
}

known_host() {
	[[ " ${SOFTROCE_HOSTS:-} " == *" $1="* ]] || usage_error "no host '$1' in this cluster (${SOFTROCE_HOSTS:-})"
}

# Sleeps $1 seconds without a fork per call (a fork costs milliseconds of a
# TCG guest's CPU): read times out on a pipe nobody writes, opened once.
nap_fd=""
nap() {
	[[ -n $nap_fd ]] || exec {nap_fd}<> <(:)
	read -rt "$1" -u "$nap_fd" || :
}

# Waits until file $1 exists, for at most $2 seconds; 1 on timeout.
await_file() {
	local f=$1 deadline=$((SECONDS + $2))
	until [[ -e $f ]]; do
		[[ $SECONDS -lt $deadline ]] || return 1
		nap 0.02
	done
}

# Waits until file $1 has its line (one write, so it is whole once it is
# not empty), for at most $2 seconds; 1 on timeout.
await_whole() {
	local f=$1 deadline=$((SECONDS + $2))
	until [[ -s $f ]]; do
		[[ $SECONDS -lt $deadline ]] || return 1
		nap 0.02
	done
}

# Prints job $1's output (in directory $2) and returns its status.
job_result() {
	local id=$1 dir=$2 rc
	rc=$(<"$dir/$id.rc")
	cat -- "$dir/$id.out" 2>/dev/null || true
	cat -- "$dir/$id.err" >&2 2>/dev/null || true
	return "$rc"
}

cluster_on() {
	in_cluster on
	[[ $# -ge 1 ]] || usage_error "on needs a host"
	local host=$1 bg="" wait_name="" kill_name="" signal=TERM timeout=600
	shift
	known_host "$host"
	while [[ $# -gt 0 ]]; do
		case $1 in
		--bg) [[ $# -ge 2 ]] || usage_error "--bg needs a name"; bg=$2; shift 2 ;;
		--wait) [[ $# -ge 2 ]] || usage_error "--wait needs a name"; wait_name=$2; shift 2 ;;
		--kill) [[ $# -ge 2 ]] || usage_error "--kill needs a name"; kill_name=$2; shift 2 ;;
		--signal) [[ $# -ge 2 ]] || usage_error "--signal needs a signal"; signal=$2; shift 2 ;;
		--timeout) [[ $# -ge 2 ]] || usage_error "--timeout needs seconds"; timeout=$2; shift 2 ;;
		--) shift; break ;;
		-*) usage_error "on: unknown option '$1'" ;;
		*) break ;;
		esac
	done
	[[ $timeout =~ ^[1-9][0-9]*$ ]] || usage_error "--timeout wants a positive number of seconds"
	[[ $signal =~ ^[A-Z0-9]+$ ]] || usage_error "--signal wants a signal name such as TERM or KILL"
	local name
	for name in "$bg" "$wait_name" "$kill_name"; do
		[[ $name =~ ^[A-Za-z0-9_-]*$ ]] || usage_error "job names are letters, digits, '_' and '-' ('$name')"
	done
	local dir=$SOFTROCE_CLUSTER_DIR/jobs/$host
	if [[ -n $wait_name || -n $kill_name ]]; then
		local id=${wait_name:-$kill_name}
		[[ -e $dir/$id.job ]] || die "on $host: no job named $id" 1
		if [[ -n $kill_name && ! -s $dir/$id.rc ]]; then
			write_whole "$dir/$id.kill" "$signal"
		fi
		await_whole "$dir/$id.rc" "$timeout" || die "on $host: job $id still running after ${timeout}s" 124
		job_result "$id" "$dir"
		return
	fi
	[[ $# -ge 1 ]] || usage_error "on $host needs a command"
	local script
	script=$(printf 'cd -- %q || exit 125\nexec' "$PWD"; printf ' %q' "$@")
	if [[ -n $bg ]]; then
		[[ ! -e $dir/$bg.job ]] || usage_error "on $host: job $bg exists already"
		submit_job "$host" "$bg" "$script"
		await_whole "$dir/$bg.pid" 30 || die "on $host: its agent did not take job $bg within 30 s" 125
		return 0
	fi
	local id="fg-$$-$RANDOM$RANDOM"
	submit_job "$host" "$id" "$script"
	if ! await_whole "$dir/$id.rc" "$timeout"; then
		write_whole "$dir/$id.kill" KILL
		die "on $host: timed out after ${timeout}s: $*" 124
	fi
	job_result "$id" "$dir"
}

# Writes $2 (and a newline) to file $1 so that it appears whole.
write_whole() {
	printf '%s\n' "$2" >"$1.tmp"
	mv -f "$1.tmp" "$1"
}

# Hands job $2 (a bash script, $3) to host $1's agent.
submit_job() {
	local dir=$SOFTROCE_CLUSTER_DIR/jobs/$1
	mkdir -p "$dir"
	write_whole "$dir/$2.job" "$3"
}

# Runs, on this host, the jobs other hosts hand it, until the cluster stops.
# The protocol, in $SOFTROCE_CLUSTER_DIR/jobs/HOST/ (files appear whole: each
# is written in one write, or under another name and renamed):
#   NAME.job   bash, sourced in a subshell of its own (its last line execs
#              the command, so that subshell's pid is the command's)
#   NAME.pid   that pid, once started
#   NAME.out, NAME.err   its stdout and stderr
#   NAME.rc    its exit status, written once it ended
#   NAME.kill  a signal name, sent to that pid
# Every fork costs a TCG guest tens of milliseconds, so a job costs two
# forks and its command's exec, and nothing here forks per poll.
# The agent also watches this host's NIC (nic_watch).
cluster_agent() {
	in_cluster agent
	local dir=$SOFTROCE_CLUSTER_DIR/jobs/$SOFTROCE_HOST f id pid sig
	local -A seen=()
	local nic_done=-1 nic_moved=$SECONDS nic_sent0="" nic_next=0
	mkdir -p "$dir"
	until [[ -e $SOFTROCE_CLUSTER_DIR/stop ]]; do
		[[ $SECONDS -lt $nic_next ]] || nic_watch
		for f in "$dir"/*.job "$dir"/*.kill; do
			[[ -e $f && -z ${seen[$f]:-} ]] || continue
			seen[$f]=1
			id=${f%.*}
			case $f in
			*.job) agent_start "$id" ;;
			*.kill)
				read -r sig <"$f" || sig=TERM
				pid=""
				[[ ! -s $id.pid ]] || read -r pid <"$id.pid"
				[[ -z $pid ]] || kill -"$sig" "$pid" 2>/dev/null || true
				;;
			esac
		done
		nap 0.05
	done
}

# Every 3 s: when eth0 has completed no transmission for 10 s or more while
# its qdisc kept handing packets to the driver, the device has stopped taking
# them (qemu's virtio-net was seen to stop consuming a guest's TX ring under a
# starved CPU, and the kernel's NETDEV WATCHDOG waits for the ring to fill,
# which took minutes of a test's retries): the console says so once, and the
# harness ends the cluster on that line (cluster_nic_wedged). The driver's
# tx_packets count completions; the qdisc's "Sent" counts hand-overs.
nic_watch() {
	local done sent
	nic_next=$((SECONDS + 3))
	read -r done </sys/class/net/eth0/statistics/tx_packets 2>/dev/null || return 0
	if [[ $done != "$nic_done" ]]; then
		nic_done=$done nic_moved=$SECONDS nic_sent0=""
		return 0
	fi
	[[ $((SECONDS - nic_moved)) -ge 10 ]] || return 0
	sent=$(tc -s qdisc show dev eth0 2>/dev/null | awk '$1 == "Sent" { print $4; exit }')
	[[ -n $sent ]] || return 0
	if [[ -z $nic_sent0 || $sent -lt $nic_sent0 ]]; then
		nic_sent0=$sent # (a test replaced the qdisc: its counts start again)
	elif [[ $((sent - nic_sent0)) -ge 3 ]]; then
		echo "<4>softroce: eth0 transmit stalled: $((sent - nic_sent0)) packets handed to the driver, none completed in $((SECONDS - nic_moved)) s" >/dev/kmsg
		nic_next=$((1 << 62))
	fi
}

# Starts job $1 (its path without .job): an outer subshell that outlives
# the job to write its status, and an inner one that sources the job (and
# so becomes its command). (Not a process group of its own: bash's monitor
# mode in a subshell sometimes never returned from `wait` in a 1-vCPU guest.)
agent_start() {
	local id=$1
	(
		(. "$id.job") >"$id.out" 2>"$id.err" </dev/null &
		printf '%s\n' "$!" >"$id.pid"
		# (set -e holds in here: a failed job must not end this subshell.)
		rc=0
		wait "$!" || rc=$?
		printf '%s\n' "$rc" >"$id.rc"
	) &
}

# Asks this machine for a fault ($1: unplug, plug, power-off) on host $2 and
# waits until it is in force.
cluster_request() {
	in_cluster "$1"
	local what=$1 host=$2 f
	known_host "$host"
	local dir=$SOFTROCE_CLUSTER_DIR/requests
	mkdir -p "$dir"
	f=$what-$host.$$.$RANDOM
	# Made under a name no one acts on, then renamed: the request appears
	# whole, or the wire could act on it (and rename it) while 9p still
	# creates it here.
	: >"$dir/.$f"
	mv -f "$dir/.$f" "$dir/$f"
	await_file "$dir/$f.done" 30 || die "$what $host: not done within 30 s (is the wire running?)" 125
}

# ---------------------------------------------------------------------------
# On this machine: boot the cluster and watch it
# ---------------------------------------------------------------------------
c_hosts=2 c_on="" c_logs="" c_mem=1024 c_cpus=1 c_slurm=""
declare -A c_mtu=()
c_run_dir="" c_wire_pid=""
declare -A c_qemu=() c_state=() c_rc=() c_runs=()
c_tails=()

cluster_parse() {
	while [[ $# -gt 0 ]]; do
		case $1 in
		--hosts) [[ $# -ge 2 ]] || usage_error "--hosts needs a number"; c_hosts=$2; shift 2 ;;
		--on) [[ $# -ge 2 ]] || usage_error "--on needs hosts"; c_on=$2; shift 2 ;;
		--slurm) c_slurm=1; shift ;;
		--netdev-mtu)
			[[ $# -ge 2 && $2 =~ ^(h[0-9]+)=([0-9]+)$ ]] || usage_error "--netdev-mtu wants HOST=MTU, e.g. h2=1000"
			c_mtu[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
			shift 2 ;;
		--out) [[ $# -ge 2 ]] || usage_error "--out needs a directory"; out_dirs+=("$2"); shift 2 ;;
		--logs) [[ $# -ge 2 ]] || usage_error "--logs needs a directory"; c_logs=$2; shift 2 ;;
		--timeout) [[ $# -ge 2 ]] || usage_error "--timeout needs seconds"; timeout_secs=$2; shift 2 ;;
		--mem) [[ $# -ge 2 ]] || usage_error "--mem needs MiB"; c_mem=$2; shift 2 ;;
		--cpus) [[ $# -ge 2 ]] || usage_error "--cpus needs a number"; c_cpus=$2; shift 2 ;;
		--clock) [[ $# -ge 2 ]] || usage_error "--clock needs a value"; clock=$2; shift 2 ;;
		-h | --help) cluster_usage; exit 0 ;;
		--) shift; break ;;
		-*) usage_error "cluster: unknown option '$1'" ;;
		*) break ;;
		esac
	done
	[[ $# -gt 0 ]] || usage_error "cluster needs a command"
	cmd=("$@")
	[[ $c_hosts =~ ^[0-9]+$ && $c_hosts -ge 2 && $c_hosts -le $CLUSTER_MAX_HOSTS ]] ||
		usage_error "--hosts must be 2 .. $CLUSTER_MAX_HOSTS (got '$c_hosts')"
	[[ $timeout_secs =~ ^[1-9][0-9]*$ ]] || usage_error "--timeout wants a positive number of seconds"
	[[ $c_mem =~ ^[0-9]+$ && $c_mem -ge 512 ]] || usage_error "--mem wants MiB, at least 512 (got '$c_mem')"
	[[ $c_cpus =~ ^[1-9][0-9]*$ && $c_cpus -le 8 ]] || usage_error "--cpus must be 1 .. 8 (got '$c_cpus')"
	case $clock in tsc | hpet) ;; *) usage_error "--clock must be tsc or hpet" ;; esac
	local h i
	for h in "${!c_mtu[@]}"; do
		[[ ${h#h} -ge 1 && ${h#h} -le $c_hosts ]] || usage_error "--netdev-mtu: no host $h in a cluster of $c_hosts"
		[[ ${c_mtu[$h]} -ge 576 && ${c_mtu[$h]} -le 9000 ]] || usage_error "--netdev-mtu $h=${c_mtu[$h]}: must be 576 .. 9000"
	done
	if [[ -z $c_on ]]; then
		for ((i = 1; i <= c_hosts; i++)); do c_runs[h$i]=1; done
	else
		local IFS=,
		for h in $c_on; do
			[[ $h =~ ^h[0-9]+$ && ${h#h} -ge 1 && ${h#h} -le $c_hosts ]] || usage_error "--on: no host '$h' in a cluster of $c_hosts"
			c_runs[$h]=1
		done
	fi
	for i in "${!out_dirs[@]}"; do
		mkdir -p -- "${out_dirs[$i]}" || die "cannot create --out directory ${out_dirs[$i]}" 2
		out_dirs[i]=$(cd -- "${out_dirs[$i]}" && pwd -P)
		[[ ${out_dirs[i]} != / ]] || usage_error "--out / would hide the whole host filesystem"
	done
	if [[ -n $c_logs ]]; then
		mkdir -p -- "$c_logs" || die "cannot create --logs directory $c_logs" 2
	fi
}

# shellcheck disable=SC2317 # invoked from a trap
cluster_cleanup() {
	local h p
	for h in "${!c_qemu[@]}"; do kill -KILL "${c_qemu[$h]}" 2>/dev/null || true; done
	[[ -z $c_wire_pid ]] || kill -TERM "$c_wire_pid" 2>/dev/null || true
	for p in "${c_tails[@]}"; do wait "$p" 2>/dev/null || true; done
	[[ -z $c_wire_pid ]] || wait "$c_wire_pid" 2>/dev/null || true
	[[ -n $c_run_dir ]] || return 0
	for h in "${!c_qemu[@]}"; do
		keep_console "$c_run_dir/$h/console.log" "-$h"
		if [[ -n $c_logs ]]; then
			for p in stdout stderr console.log; do cp -f "$c_run_dir/$h/$p" "$c_logs/$h.${p%.log}" 2>/dev/null || true; done
		fi
	done
	rm -rf -- "$c_run_dir"
}

# The last octets of host N's IPv4-mapped GID (10.98.0.N -> 0a62:000n).
cluster_gid_tail() { printf '%02x%02x:%02x%02x' 10 98 0 "$1"; }

cluster_boot_host() {
	local i=$1 h=h$1 ctl=$c_run_dir/h$1 hosts_list=$2
	new_ctl_dir "$ctl" run
	{
		echo "net_kind=nic"
		echo "net_addr=$CLUSTER_SUBNET.$i"
		echo "net_prefix=$CLUSTER_PREFIX"
		echo "net_mtu=${c_mtu[$h]:-}"
		echo "net_gid=$(cluster_gid_tail "$i")"
	} >"$ctl/net"
	local j
	for ((j = 1; j <= c_hosts; j++)); do echo "$CLUSTER_SUBNET.$j h$j"; done >"$ctl/cluster"
	write_handover "$ctl" "$h" "$CLUSTER_SUBNET.$i" "${cmd[@]}" <<EOF
softroce_cluster=1
softroce_hosts=$(printf %q "$hosts_list")
softroce_nhosts=$c_hosts
softroce_runs=${c_runs[$h]:-}
softroce_slurm=$c_slurm
softroce_script=$(printf %q "$SCRIPT_DIR/softroce")
EOF
	guest_name=softroce-$h build_qemu_cmd "$accel" "$image" "$ctl" "$c_mem" "$c_cpus" \
		-virtfs "local,path=$c_run_dir/shared,mount_tag=cluster,security_model=none,multidevs=remap" \
		-netdev "dgram,id=wire,local.type=unix,local.path=$c_run_dir/$h.sock,remote.type=unix,remote.path=$c_run_dir/hub.sock" \
		-device "virtio-net-pci,netdev=wire,mac=52:54:00:62:00:$(printf %02x "$i")"
	"${qemu_cmd[@]}" -display none -monitor none -serial "file:$ctl/console.log" -append "$(guest_append)" \
		</dev/null >"$ctl/qemu.out" 2>&1 &
	c_qemu[$h]=$!
	c_state[$h]=running
	# Each host's output, line by line with its name in front; tail ends
	# (after a last read) once that host's qemu is gone.
	tail -s 0.2 -n +1 -f --pid="${c_qemu[$h]}" "$ctl/stdout" 2>/dev/null | sed -u "s/^/$h| /" &
	c_tails+=($!)
	tail -s 0.2 -n +1 -f --pid="${c_qemu[$h]}" "$ctl/stderr" 2>/dev/null | sed -u "s/^/$h| /" >&2 &
	c_tails+=($!)
}

# Stops every host still running (state $1 for them).
cluster_stop_all() {
	local h
	: >"$c_run_dir/shared/stop"
	for h in "${!c_qemu[@]}"; do
		if [[ ${c_state[$h]} == running ]]; then
			kill -KILL "${c_qemu[$h]}" 2>/dev/null || true
			{ wait "${c_qemu[$h]}"; } 2>/dev/null || true
			c_state[$h]=$1
		fi
	done
}

# Marks host $1 as ended once its qemu has exited.
cluster_reap() {
	local h=$1 ctl=$c_run_dir/$1 qrc=0
	{ wait "${c_qemu[$h]}"; } 2>/dev/null || qrc=$?
	if [[ ${c_state[$h]} == powering-off ]]; then
		c_state[$h]=powered-off
	elif [[ -s $ctl/rc ]]; then
		c_state[$h]=ended
		c_rc[$h]=$(<"$ctl/rc")
	else
		c_state[$h]=died
		c_rc[$h]=125
		info "cluster: $h: $(guest_death_reason "$ctl") (qemu exit status $qrc)"
		# (qemu's warning that TCG lacks invtsc is expected: not a reason.)
		[[ ! -s $ctl/qemu.out ]] || grep -v "TCG doesn't support requested feature" "$ctl/qemu.out" |
			sed "s/^/softroce: $h: qemu: /" >&2 || true
		console_tail_of "$ctl/console.log" "$h" "-$h"
	fi
}

# A host whose virtual NIC stopped transmitting: the guest kernel's TX
# watchdog ("NETDEV WATCHDOG: ... transmit queue N timed out") fires every
# 5 s and virtio-net never resets the queue, so the host can neither be
# reached nor reach anyone again. Seen under TCG on a CPU-starved machine.
# Prints the first such line, without the timestamp; nothing when healthy.
cluster_nic_wedged() { console_first_match "$1" 'NETDEV WATCHDOG|softroce: eth0 transmit stalled'; }

# Kills host $1, whose NIC is wedged ($2, the watchdog line), and marks it
# failed: waiting would only run into the cluster's timeout.
cluster_kill_wedged() {
	local h=$1 ctl=$c_run_dir/$1
	info "cluster: $h: its network device stopped transmitting: $2"
	info "cluster: $h: a wedged virtual NIC never recovers, so $h is killed now instead of at the timeout"
	console_tail_of "$ctl/console.log" "$h" "-$h"
	kill -KILL "${c_qemu[$h]}" 2>/dev/null || true
	{ wait "${c_qemu[$h]}"; } 2>/dev/null || true
	c_state[$h]=wedged
	c_rc[$h]=125
}

cluster_handle_requests() {
	local f name h
	for f in "$c_run_dir/shared/requests"/power-off-*; do
		[[ -e $f && $f != *.done ]] || continue
		name=${f##*/power-off-}
		h=${name%%.*}
		if [[ ${c_state[$h]:-} == running ]]; then
			info "cluster: powering $h off (asked from inside the cluster)"
			c_state[$h]=powering-off
			kill -KILL "${c_qemu[$h]}" 2>/dev/null || true
		fi
		mv -f "$f" "$f.done"
	done
}

cluster_main() {
	cluster_parse "$@"
	# The wire's sockets live in a network namespace of their own when one
	# can be made: there the unix datagram queue limit (10 frames by default)
	# can be raised without touching this machine's settings.
	if [[ -z ${SOFTROCE_CLUSTER_NETNS:-} ]] && unshare -n true 2>/dev/null; then
		SOFTROCE_CLUSTER_NETNS=1 exec unshare -n -- "$SCRIPT_DIR/softroce" cluster "$@"
	fi
	[[ -z ${SOFTROCE_CLUSTER_NETNS:-} ]] || sysctl -qw net.unix.max_dgram_qlen=1024 2>/dev/null || true
	command -v python3 >/dev/null || die "the cluster's wire needs python3"
	prepare_guest
	trap cluster_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM HUP
	c_run_dir=$(mktemp -d "${TMPDIR:-/tmp}/softroce-cluster.XXXXXX")
	mkdir -p "$c_run_dir/shared/ready" "$c_run_dir/shared/jobs" "$c_run_dir/shared/requests"
	# The wire runs ahead of the guests for the CPU where it may: a wire
	# that falls behind makes qemu's sends fail (its socket's buffer full),
	# and qemu's virtio-net was seen never to take a guest's packets again
	# after such a stall under a CPU hog (nic_watch).
	local nice_wire=()
	! nice -n -10 true 2>/dev/null || nice_wire=(nice -n -10)
	"${nice_wire[@]}" python3 "$SCRIPT_DIR/softroce-wire" "$c_run_dir/hub.sock" "$c_run_dir/shared/requests" \
		"$c_run_dir/shared/wire-stats" &
	c_wire_pid=$!
	await_file "$c_run_dir/hub.sock" 10 || die "the wire (scripts/softroce-wire) did not start"
	local i hosts_list=""
	for ((i = 1; i <= c_hosts; i++)); do hosts_list+="${hosts_list:+ }h$i=$CLUSTER_SUBNET.$i"; done
	info "cluster of $c_hosts guests ($accel, clock $clock, $c_cpus vCPU and $c_mem MiB each, kernel $kver): $hosts_list"
	local started=$SECONDS
	for ((i = 1; i <= c_hosts; i++)); do cluster_boot_host "$i" "$hosts_list"; done

	local h runners_left ended_at="" failed="" wedged next_nic_check=0
	while :; do
		cluster_handle_requests
		# Consoles are read every 2 s, not on every 0.1 s turn.
		if [[ $SECONDS -ge $next_nic_check ]]; then
			next_nic_check=$((SECONDS + 2))
			for h in "${!c_qemu[@]}"; do
				[[ ${c_state[$h]} == running ]] || continue
				wedged=$(cluster_nic_wedged "$c_run_dir/$h/console.log")
				[[ -z $wedged ]] || { cluster_kill_wedged "$h" "$wedged"; failed=${failed:-$h}; }
			done
		fi
		for h in "${!c_qemu[@]}"; do
			[[ ${c_state[$h]} == running || ${c_state[$h]} == powering-off ]] || continue
			kill -0 "${c_qemu[$h]}" 2>/dev/null && continue
			cluster_reap "$h"
			if [[ ${c_state[$h]} == died ]] || [[ ${c_state[$h]} == ended && ${c_rc[$h]} -ne 0 ]]; then
				failed=${failed:-$h}
			fi
		done
		if [[ -n $failed ]]; then
			cluster_stop_all stopped
			break
		fi
		runners_left=0
		for h in "${!c_runs[@]}"; do [[ ${c_state[$h]} != running ]] || runners_left=$((runners_left + 1)); done
		if [[ $runners_left -eq 0 ]]; then
			# Peers see "stop" and power off by themselves; a few seconds,
			# then whatever is left is stopped.
			: >"$c_run_dir/shared/stop"
			ended_at=${ended_at:-$SECONDS}
			local left=0
			for h in "${!c_qemu[@]}"; do [[ ${c_state[$h]} != running ]] || left=1; done
			[[ $left -eq 1 && $((SECONDS - ended_at)) -lt 20 ]] || { cluster_stop_all stopped; break; }
		fi
		if [[ $((SECONDS - started)) -ge $timeout_secs ]]; then
			for h in "${!c_qemu[@]}"; do
				[[ ${c_state[$h]} == running ]] && console_tail_of "$c_run_dir/$h/console.log" "$h" "-$h"
			done
			cluster_stop_all timed-out
			info "cluster: timed out after ${timeout_secs}s (boots included); every guest killed"
			failed=timeout
			break
		fi
		nap 0.1
	done
	for i in "${c_tails[@]}"; do wait "$i" 2>/dev/null || true; done
	c_tails=()
	local rc=0 line
	for ((i = 1; i <= c_hosts; i++)); do
		h=h$i
		case ${c_state[$h]} in
		ended) line="exited with status ${c_rc[$h]}" ;;
		died) line="died (see above)" ;;
		wedged) line="killed: its network device stopped transmitting (see above)" ;;
		powered-off) line="powered off on request" ;;
		stopped) line="stopped${c_runs[$h]:+ before its command ended}" ;;
		timed-out) line="still running at the timeout" ;;
		*) line=${c_state[$h]} ;;
		esac
		[[ -n ${c_runs[$h]:-} ]] || line+=" (peer only)"
		info "cluster: $h $line"
	done
	if [[ $failed == timeout ]]; then
		rc=124
	elif [[ -n $failed ]]; then
		rc=${c_rc[$failed]}
		case ${c_state[$failed]} in
		died) line="died" ;;
		wedged) line="lost its network" ;;
		*) line="exited with status $rc" ;;
		esac
		info "cluster: failed: $failed $line"
	fi
	info "cluster: $((SECONDS - started)) s from the first boot"
	exit "$rc"
}
