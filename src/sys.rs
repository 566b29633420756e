//! The one place for OS and CPU calls outside the verbs wrappers: CPU
//! instructions (the time-stamp counter and its CPUID check) today, and later
//! CPU affinity, `getrusage` and the aarch64 `cntvct_el0` counter. The crate
//! denies `unsafe` everywhere else but here and in `verbs`; each function
//! below is safe to call and keeps its `unsafe` block small, with a `SAFETY:` line.

/// Reads the time-stamp counter (0 where the CPU has none we know of).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no memory effects and exists on every x86_64 CPU.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Reads the time-stamp counter (0 where the CPU has none we know of).
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub fn rdtsc() -> u64 {
    0
}

/// Whether CPUID advertises an invariant TSC (leaf 0x8000_0007, EDX bit 8):
/// the TSC runs at a constant rate in all P/C-states, so tick differences are
/// time differences.
#[cfg(target_arch = "x86_64")]
pub fn invariant_tsc() -> bool {
    // `__cpuid` became a safe function in recent Rust; older compilers need the block.
    #[allow(unused_unsafe)]
    // SAFETY: cpuid exists on every x86_64 CPU; the leaf's support is checked first.
    unsafe {
        let max = core::arch::x86_64::__cpuid(0x8000_0000).eax;
        max >= 0x8000_0007 && core::arch::x86_64::__cpuid(0x8000_0007).edx & (1 << 8) != 0
    }
}

/// Whether CPUID advertises an invariant TSC (never, off x86_64).
#[cfg(not(target_arch = "x86_64"))]
pub fn invariant_tsc() -> bool {
    false
}
