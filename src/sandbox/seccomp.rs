//! The system-call half of the sandbox for commands that run without the owner's approval: a
//! seccomp filter that refuses `socket(AF_UNIX, …)` (`EACCES`). A network namespace separates
//! network interfaces and abstract unix sockets, but not unix sockets with a path: without this,
//! such a command could hand data to a local relay (a DNS resolver's or D-Bus socket, a docker or
//! ssh-agent socket) or ask a service manager to start something outside the sandbox.
//! `socketpair` stays allowed. System calls made through another architecture's entry (32-bit
//! programs on a 64-bit kernel) are refused with `ENOSYS`, so the filter cannot be bypassed
//! that way.
//!
//! Linux x86_64 and aarch64 only; elsewhere [`FILTER_AVAILABLE`] is false and no command counts
//! as safe.

/// Whether this build can install the filter.
pub const FILTER_AVAILABLE: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH: u32 = 0;

// Offsets into `struct seccomp_data` (linux/seccomp.h): nr, arch, instruction_pointer, args[6].
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// The low 32 bits of `args[0]` (little-endian targets only, which both supported ones are).
const OFF_ARG0: u32 = 16;

const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K

const fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

const fn jeq(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: BPF_JEQ_K,
        jt,
        jf,
        k,
    }
}

/// The filter program.
static PROGRAM: [libc::sock_filter; 9] = [
    stmt(BPF_LD_W_ABS, OFF_ARCH),
    jeq(AUDIT_ARCH, 1, 0),
    stmt(BPF_RET_K, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
    stmt(BPF_LD_W_ABS, OFF_NR),
    jeq(libc::SYS_socket as u32, 0, 3),
    stmt(BPF_LD_W_ABS, OFF_ARG0),
    jeq(libc::AF_UNIX as u32, 0, 1),
    stmt(BPF_RET_K, libc::SECCOMP_RET_ERRNO | libc::EACCES as u32),
    stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW),
];

/// Install the filter in the calling process (after `PR_SET_NO_NEW_PRIVS`). Call only between
/// `fork` and `exec`: one async-signal-safe system call, nothing allocated.
///
/// # Errors
/// The OS error of `prctl(PR_SET_SECCOMP)`; `Unsupported` on other architectures.
pub fn install_in_current_process() -> std::io::Result<()> {
    if !FILTER_AVAILABLE {
        return Err(std::io::Error::from(std::io::ErrorKind::Unsupported));
    }
    let prog = libc::sock_fprog {
        len: PROGRAM.len() as u16,
        filter: PROGRAM.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `prog` points at a static, valid BPF program for the lifetime of the call; the
    // kernel copies it.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &prog as *const libc::sock_fprog as libc::c_ulong,
            0,
            0,
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Drop every capability from the bounding set, so a command started by root gains none at
/// `exec` (no setting the clock or host name, no raw devices, no network administration).
/// Async-signal-safe; errors for capabilities the kernel does not know are ignored.
pub fn drop_capabilities_in_current_process() {
    for cap in 0..64 {
        // SAFETY: integer arguments only.
        unsafe {
            libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
        }
    }
}
