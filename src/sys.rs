//! The one place for OS and CPU calls outside the verbs wrappers: the CPU's
//! cycle counter (the x86_64 TSC, the aarch64 virtual counter), CPU
//! affinity, the process's own CPU time, buffers mapped from 2 MiB huge pages,
//! the host's memory and how much of it this process may pin, and the TCP
//! socket options and polls that notice a vanished peer. The crate denies `unsafe` everywhere else but here and in
//! `verbs`; each function below is safe to call and keeps its `unsafe` block
//! small, with a `SAFETY:` line.

use std::io;

/// The name of the CPU's cycle counter that [`counter`] reads, or `None`
/// where this build knows of none (then `counter` returns 0).
#[cfg(target_arch = "x86_64")]
pub const COUNTER: Option<&str> = Some("tsc");
#[cfg(target_arch = "aarch64")]
pub const COUNTER: Option<&str> = Some("cntvct");
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub const COUNTER: Option<&str> = None;

/// Reads the time-stamp counter: one instruction, no syscall.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn counter() -> u64 {
    // SAFETY: rdtsc has no memory effects and exists on every x86_64 CPU.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Reads the generic timer's virtual count (`cntvct_el0`), which Linux lets
/// user space read. The `isb` keeps the read from being hoisted above earlier
/// instructions (what the kernel's own vDSO does).
///
/// UNTESTED: the project's machines are x86_64 and this path has not been
/// compiled or run here (no aarch64 target installed); it follows the
/// Arm ARM and the kernel's `arch_timer_read_cntvct_el0`.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
pub fn counter() -> u64 {
    let v: u64;
    // SAFETY: reading cntvct_el0 at EL0 is allowed by Linux (CNTKCTL_EL1.EL0VCTEN
    // is set); the instructions touch no memory and no stack. (No `nomem`:
    // the compiler must not move memory accesses across a timestamp.)
    unsafe {
        core::arch::asm!("isb", "mrs {v}, cntvct_el0", v = out(reg) v,
            options(nostack, preserves_flags));
    }
    v
}

/// No counter known on this architecture.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
#[inline(always)]
pub fn counter() -> u64 {
    0
}

/// The counter's nominal frequency in Hz where the CPU states it
/// (`cntfrq_el0` on aarch64; UNTESTED here, see [`counter`]); `None` on
/// x86_64, whose TSC rate is calibrated instead.
#[cfg(target_arch = "aarch64")]
pub fn counter_hz() -> Option<u64> {
    let v: u64;
    // SAFETY: cntfrq_el0 is readable at EL0; no memory or stack is touched.
    unsafe {
        core::arch::asm!("mrs {v}, cntfrq_el0", v = out(reg) v,
            options(nomem, nostack, preserves_flags));
    }
    (v != 0).then_some(v)
}

/// The counter's nominal frequency (not stated on this architecture).
#[cfg(not(target_arch = "aarch64"))]
pub fn counter_hz() -> Option<u64> {
    None
}

/// The CPUs the calling thread may run on (its affinity mask), ascending;
/// empty if the kernel would not say.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain bits; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; the size passed is the set's own.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET reads bit `cpu` of `set`, and `cpu` < CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Restricts the calling thread to `cpus` (not to the whole process).
/// Fails with `InvalidInput` for an empty list or a CPU number at or above
/// `CPU_SETSIZE` (1024), and with the kernel's error for CPUs that do not
/// exist or are not allowed (e.g. outside the cgroup's cpuset).
pub fn set_thread_cpus(cpus: &[usize]) -> io::Result<()> {
    let limit = libc::CPU_SETSIZE as usize;
    if cpus.is_empty() || cpus.iter().any(|&c| c >= limit) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU list {cpus:?} is empty or names a CPU ≥ {limit}"),
        ));
    }
    // SAFETY: cpu_set_t is plain bits; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        // SAFETY: CPU_SET writes bit `cpu` of `set`, and `cpu` < CPU_SETSIZE (checked above).
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: pid 0 is the calling thread; the size passed is the set's own.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    set_thread_cpus(&[cpu])
}

/// Asks the kernel to wake the calling thread's sleeps on time rather than
/// up to 50 µs late (its default timer slack, there to batch wake-ups). A
/// paced issuer sleeps until just before its next token; a failure only
/// makes those wake-ups later, so it is ignored.
pub fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument (the slack in ns;
    // 1 is the smallest, 0 would mean "the default") and touches no memory.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

/// Gives the calling thread a file-descriptor table of its own, a copy of
/// the one it shared with the process's other threads (`unshare(2)` with
/// `CLONE_FILES`): what either side opens or closes from then on, the other
/// does not see, and the copy holds every descriptor it copied open until
/// the thread ends. A helper thread that only polls a descriptor it already
/// has calls this so that the measuring thread is alone in its table again:
/// the kernel's `fdget` takes and drops a reference on the file (two atomic
/// operations) in every system call on a shared table, and soft-RoCE's
/// doorbell is a `write(2)` per post, inside the timed span.
pub fn own_descriptor_table() -> io::Result<()> {
    // SAFETY: unshare takes flags only and touches no memory of ours.
    match unsafe { libc::unshare(libc::CLONE_FILES) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Closes descriptor number `fd` in the calling thread's table, where no
/// value of this program owns it: the copy a thread left behind when it moved
/// to a table of its own ([`own_descriptor_table`]) while a value of its own
/// went on owning the number there. A number that is not open is ignored.
pub fn close_left_copy(fd: std::os::fd::RawFd) {
    // SAFETY: close touches no memory; the caller names a descriptor no
    // value in this thread's table owns, so no owner is left dangling.
    unsafe { libc::close(fd) };
}

/// Closes, in the calling thread's own table (after
/// [`own_descriptor_table`]), the copies of every socket but `keep` and of
/// every rdma_cm event channel: descriptors other threads own, whose copies
/// would hold a finished connection open (its peer never sees it end) or a
/// channel's file past its session. Other copies (devices, pipes, files) cost
/// nothing anyone sees and stay, since libraries may hold them; so do the
/// standard streams, sockets too under journald, lest a later descriptor
/// take their numbers and the log go into it. Returns how many were closed.
pub fn close_copied_sockets(keep: std::os::fd::RawFd) -> io::Result<usize> {
    // thread-self, not self: /proc/self/fd lists the main thread's table.
    let listed: Vec<std::os::fd::RawFd> = std::fs::read_dir("/proc/thread-self/fd")?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    let mut closed = 0;
    for fd in listed.into_iter().filter(|&fd| fd != keep && fd > 2) {
        // The listing's own descriptor is gone by now, and fails here.
        let Ok(target) = std::fs::read_link(format!("/proc/thread-self/fd/{fd}")) else {
            continue;
        };
        let target = target.to_string_lossy();
        if target.starts_with("socket:") || target == "/dev/infiniband/rdma_cm" {
            // SAFETY: close touches no memory; after the unshare no value in
            // this thread's table owns a copy of another thread's socket or
            // channel (their owners live in the table it left).
            if unsafe { libc::close(fd) } == 0 {
                closed += 1;
            }
        }
    }
    Ok(closed)
}

/// The CPU the calling thread is running on right now, if the kernel says.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes no arguments and touches no caller memory.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

/// CPU time this process has used so far (user + system, every thread),
/// from `getrusage(RUSAGE_SELF)`; `None` if the kernel would not say.
pub fn process_cpu_time() -> Option<std::time::Duration> {
    // SAFETY: rusage is plain integers; all zeroes is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF is valid and `ru` is a live, writable rusage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return None;
    }
    let tv = |t: libc::timeval| {
        std::time::Duration::from_secs(t.tv_sec.max(0) as u64)
            + std::time::Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    Some(tv(ru.ru_utime) + tv(ru.ru_stime))
}

/// Asks the kernel to notice within `after` that the peer of TCP socket
/// `fd` is gone, even while neither side sends: keepalive probes go out
/// after a second of silence and every second after that, and
/// TCP_USER_TIMEOUT ends the connection (ETIMEDOUT) once data or probes
/// have gone unacknowledged for `after`. A live peer's kernel answers the
/// probes whatever its process is doing, so only a host or a wire that is
/// gone trips it.
pub fn tcp_liveness(fd: std::os::fd::RawFd, after: std::time::Duration) -> io::Result<()> {
    let secs = after.as_secs().clamp(1, i32::MAX as u64) as libc::c_int;
    let ms = after.as_millis().clamp(1, u32::MAX as u128) as libc::c_uint;
    set_int(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1)?;
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, 1)?;
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 1)?;
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT, secs.min(127))?;
    set_int(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_USER_TIMEOUT,
        ms as libc::c_int,
    )
}

fn set_int(
    fd: std::os::fd::RawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `v` is a live c_int and its size is passed; setsockopt reads
    // only that many bytes and fails cleanly on a bad fd or option.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// What ended a TCP connection, as [`wait_hangup`] saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hangup {
    /// The peer closed its side (its process ended or closed the socket).
    Closed,
    /// The connection failed: the kernel's error (ETIMEDOUT when the peer's
    /// host or the wire to it stopped answering, ECONNRESET, ...).
    Failed(io::ErrorKind, String),
}

/// Waits up to `wait` for the connection on `fd` to end, reading nothing:
/// `poll(2)` for a hangup, an error or the peer's FIN only, so messages that
/// arrive meanwhile stay for their reader. `None` if it is still up.
pub fn wait_hangup(fd: std::os::fd::RawFd, wait: std::time::Duration) -> Option<Hangup> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLRDHUP,
        revents: 0,
    };
    let ms = wait.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: one live pollfd, and the count passed is 1.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    if n <= 0 {
        return None;
    }
    if p.revents & libc::POLLERR != 0 {
        let mut err: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `err` and `len` are live and `len` holds err's size.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                (&mut err as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        let e = if rc == 0 && err != 0 {
            io::Error::from_raw_os_error(err)
        } else {
            io::Error::other("socket error")
        };
        return Some(Hangup::Failed(e.kind(), e.to_string()));
    }
    if p.revents & (libc::POLLHUP | libc::POLLRDHUP | libc::POLLNVAL) != 0 {
        return Some(Hangup::Closed);
    }
    None
}

/// Bytes in one huge page that [`HugePages`] maps (x86_64 and aarch64's default).
pub const HUGE_PAGE: usize = 2 << 20;
/// Where the kernel's pool of reserved huge pages is sized.
pub const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";

/// Huge pages the kernel has reserved (`/proc/sys/vm/nr_hugepages`), or
/// `None` if that file cannot be read (no hugetlbfs support).
pub fn reserved_huge_pages() -> Option<u64> {
    std::fs::read_to_string(NR_HUGEPAGES)
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Reserved huge pages not yet in use (`HugePages_Free` of `/proc/meminfo`).
pub fn free_huge_pages() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("HugePages_Free:"))?
        .trim()
        .parse()
        .ok()
}

/// The host's memory (`MemTotal` of `/proc/meminfo`), in bytes.
pub fn mem_total() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// The soft `RLIMIT_MEMLOCK`: bytes this process may pin, `None` if unlimited
/// (or unreadable, which pins nothing less than the kernel allows anyway).
pub fn memlock_limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a live rlimit the call fills in.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) };
    if rc != 0 || r.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    Some(r.rlim_cur)
}

/// Whether this process holds CAP_IPC_LOCK (bit 14 of `CapEff` in
/// `/proc/self/status`), with which the kernel ignores `RLIMIT_MEMLOCK`.
pub fn can_lock_any_memory() -> bool {
    const CAP_IPC_LOCK: u32 = 14;
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps >> CAP_IPC_LOCK & 1 == 1)
}

/// An anonymous, zero-filled private mapping backed by 2 MiB huge pages
/// (`MAP_HUGETLB`), unmapped on drop. Its length is a whole number of pages.
pub struct HugePages {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; which threads
// touch it, and how, is the owner's business (MemoryRegion's atomics).
unsafe impl Send for HugePages {}
// SAFETY: see Send above; &HugePages hands out only the address.
unsafe impl Sync for HugePages {}

impl HugePages {
    /// Maps at least `len` bytes (rounded up to whole huge pages). Fails with
    /// the kernel's error, ENOMEM when too few huge pages are free.
    pub fn map(len: usize) -> io::Result<HugePages> {
        let len = len.max(1).div_ceil(HUGE_PAGE) * HUGE_PAGE;
        // SAFETY: a fresh anonymous mapping at an address the kernel picks;
        // no existing memory is touched.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(HugePages {
            ptr: ptr.cast(),
            len,
        })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Bytes mapped (whole huge pages).
    pub fn bytes(&self) -> usize {
        self.len
    }
}

impl Drop for HugePages {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly the mapping made in `map`, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinning_restricts_the_thread_and_can_be_undone() {
        let before = allowed_cpus();
        assert!(!before.is_empty(), "a thread runs on some CPU");
        // On a thread of its own, so the test harness's thread keeps its mask.
        std::thread::spawn(move || {
            let cpu = *before.last().unwrap();
            pin_current_thread(cpu).expect("pin to an allowed CPU");
            assert_eq!(allowed_cpus(), vec![cpu]);
            assert_eq!(current_cpu(), Some(cpu));
            set_thread_cpus(&before).expect("restore");
            assert_eq!(allowed_cpus(), before);
        })
        .join()
        .unwrap();
        assert!(set_thread_cpus(&[]).is_err());
        assert!(pin_current_thread(1 << 20).is_err());
    }

    /// After `own_descriptor_table`, a descriptor the helper closes stays
    /// open for the thread it left, and one that thread opens later is not
    /// the helper's.
    #[test]
    fn an_own_descriptor_table_is_a_copy_apart() {
        use std::io::Read;
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        let mut file = std::fs::File::open("/proc/self/stat").unwrap();
        let fd = file.as_raw_fd();
        let (to_main, from_helper) = std::sync::mpsc::channel();
        let (to_helper, from_main) = std::sync::mpsc::channel::<i32>();
        let helper = std::thread::spawn(move || {
            own_descriptor_table().expect("unshare(CLONE_FILES)");
            // SAFETY: `fd` is open in this thread's copy of the table and
            // nothing else in this thread uses it.
            drop(unsafe { OwnedFd::from_raw_fd(fd) });
            to_main.send(()).unwrap();
            let later = from_main.recv().unwrap();
            // SAFETY: F_GETFD reads a descriptor's flags and touches no memory.
            unsafe { libc::fcntl(later, libc::F_GETFD) }
        });
        from_helper.recv().unwrap();
        let mut text = String::new();
        file.read_to_string(&mut text).expect("still open here");
        assert!(!text.is_empty());
        let later = std::fs::File::open("/proc/self/stat").unwrap();
        to_helper.send(later.as_raw_fd()).unwrap();
        assert_eq!(helper.join().unwrap(), -1, "not in the helper's table");
    }

    /// After the unshare, the copied sockets are closed in the helper's
    /// table only, the one it keeps and other files stay open there.
    #[test]
    fn copied_sockets_but_the_kept_one_close_in_the_helper_only() {
        use std::os::fd::AsRawFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let kept = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let file = std::fs::File::open("/proc/self/stat").unwrap();
        let fds = [listener.as_raw_fd(), kept.as_raw_fd(), file.as_raw_fd()];
        let open = |fd| {
            // SAFETY: F_GETFD reads a descriptor's flags and touches no memory.
            unsafe { libc::fcntl(fd, libc::F_GETFD) != -1 }
        };
        let seen = std::thread::spawn(move || {
            own_descriptor_table().expect("unshare(CLONE_FILES)");
            // Standard error a socket, as under journald, in this table only.
            // SAFETY: dup2 touches no memory; fd 2 in this copy of the
            // table is replaced, and nothing here writes to it.
            assert_eq!(unsafe { libc::dup2(fds[0], 2) }, 2);
            let closed = close_copied_sockets(fds[1]).expect("/proc/thread-self/fd");
            (closed, fds.map(open), open(2))
        })
        .join()
        .unwrap();
        assert!(seen.0 >= 1, "the listener's copy at least: {seen:?}");
        assert_eq!(seen.1, [false, true, true], "listener, kept, file");
        assert!(seen.2, "the standard error stays, a socket or not");
        assert_eq!(fds.map(open), [true; 3], "all open in the table left");
    }

    #[test]
    fn the_counter_moves_forward() {
        if COUNTER.is_some() {
            let a = counter();
            std::thread::sleep(std::time::Duration::from_millis(1));
            assert!(counter() > a);
        }
    }
}
