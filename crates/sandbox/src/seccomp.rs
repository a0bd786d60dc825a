//! The system-call half of the shell sandbox: a seccomp filter built with `seccompiler` (the
//! rust-vmm library Firecracker uses) and installed in the sandbox helper just before it starts
//! the command ([`super::helper`]). It has two profiles:
//!
//! - [`Profile::Unapproved`], for a command that runs **without** the owner's yes (a "safe"
//!   one): it refuses what such a command never needs and what would get around the other
//!   layers ([`UNAPPROVED_REFUSED`]) — `io_uring_*` (its operations are not seen by seccomp: an
//!   `IORING_OP_SOCKET` would open the socket `socket(2)` is refused), `ptrace` and
//!   `process_vm_*`, `bpf`, `userfaultfd`, `perf_event_open`, the key-ring calls, every mount
//!   call, new namespaces (`unshare`/`clone` with a `CLONE_NEW*` flag, `setns`), `kexec_*` and
//!   module loading, `open_by_handle_at` (a file by inode, past path checks), `pidfd_getfd`,
//!   terminal input injection (`ioctl(TIOCSTI)`, compared as the kernel reads the request: its
//!   low 32 bits) — and `socket(2)` for every family (`EACCES`):
//!   a network namespace separates interfaces but not unix sockets with a path, so without this
//!   such a command could reach a local PostgreSQL, docker or D-Bus socket. `socketpair(2)`
//!   stays allowed (pipes between processes of the command).
//! - [`Profile::Approved`], for a command the owner approved: what a user's command needs stays
//!   (unix sockets for `docker` and `psql`, the network, `ptrace` of its own children for
//!   `strace`); what reaches past the sandbox into the machine or the daemon is refused
//!   ([`APPROVED_REFUSED`]: mounts, which would uncover the hidden places, module loading,
//!   `kexec`, `bpf`, `open_by_handle_at`, `pidfd_getfd`, terminal input injection). `ptrace` and `process_vm_*` of the
//!   daemon fail anyway: the command runs in a PID namespace of its own where the daemon has no
//!   pid, and Landlock refuses tracing a process outside the command's domain.
//!
//! Both are allow-lists: a call is allowed only when its number is one of this architecture's
//! own system calls up to [`HIGHEST_KNOWN`] (everything else, including calls added by later
//! kernels and the x32 numbers `nr | 0x40000000` on x86_64, gets `ENOSYS`), and it is not on the
//! profile's refused list (`EPERM`). A call made through another architecture's entry (32-bit
//! `int 0x80` on x86_64) fails the filter's architecture check and kills the process.
//! `clone3` gets `ENOSYS` in both profiles, so the C library falls back to `clone`, whose flags
//! the filter can read.
//!
//! Linux x86_64 and aarch64 only; elsewhere [`FILTER_AVAILABLE`] is false and no command counts
//! as safe.

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// Whether this build can install the filter.
pub const FILTER_AVAILABLE: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

/// The highest system-call number of this architecture the filter lets through (Linux 6.17's
/// tables end at 469 on both x86_64 and aarch64); numbers above it get `ENOSYS`.
pub const HIGHEST_KNOWN: i64 = 469;

/// Which set of system calls a command gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Profile {
    /// A command that runs without the owner's approval.
    Unapproved,
    /// A command the owner approved.
    Approved,
}

/// `open_tree_attr(2)` (Linux 6.15), not yet in the `libc` crate; the same number on x86_64 and
/// aarch64.
const SYS_OPEN_TREE_ATTR: i64 = 467;

/// Calls that mount or change mounts (they could uncover what the mount namespace hides).
const MOUNT_CALLS: &[i64] = &[
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    SYS_OPEN_TREE_ATTR,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
];

/// Calls that reach the kernel or other processes past every other layer.
const KERNEL_CALLS: &[i64] = &[
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_bpf,
    libc::SYS_open_by_handle_at,
    libc::SYS_pidfd_getfd,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// Refused to a command that runs without approval, besides [`MOUNT_CALLS`] and
/// [`KERNEL_CALLS`] (and `socket`, `clone`/`unshare` with new namespaces, `ioctl(TIOCSTI)`).
pub const UNAPPROVED_REFUSED: &[i64] = &[
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_userfaultfd,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_setns,
    libc::SYS_quotactl,
    libc::SYS_vhangup,
    libc::SYS_name_to_handle_at,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_modify_ldt,
];

/// Refused to a command the owner approved: [`MOUNT_CALLS`] and [`KERNEL_CALLS`] (and
/// `ioctl(TIOCSTI)`).
pub const APPROVED_REFUSED: &[i64] = &[];

/// The `CLONE_NEW*` flags a `clone` or `unshare` may not carry in the unapproved profile.
/// (`CLONE_NEWTIME` shares its bit with the exit signal of `clone`, so it is checked for
/// `unshare` only.)
const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWCGROUP as u64,
];
const CLONE_NEWTIME: u64 = 0x80;

/// `ioctl` requests that type into a terminal (`TIOCSTI`) or drive the console (`TIOCLINUX`).
const TERMINAL_INJECTION: &[u64] = &[0x5412, 0x541C];

fn target() -> Result<TargetArch, String> {
    std::env::consts::ARCH
        .try_into()
        .map_err(|e| format!("no system-call filter for {}: {e}", std::env::consts::ARCH))
}

/// A compared argument as the kernel reads it: the filter sees all 64 bits of every argument,
/// so a comparison wider than the kernel's own type would let a value with the high bits set
/// pass the filter and still mean the refused request to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// `unsigned int`, or an `unsigned long` the kernel cuts to its low 32 bits.
    Low32,
    /// All 64 bits.
    Full64,
}

/// `clone(2)`'s flags: `kernel_clone_args.flags = lower_32_bits(clone_flags)`.
const CLONE_FLAGS: (u8, Width) = (0, Width::Low32);
/// `unshare(2)`'s flags: `ksys_unshare(unsigned long)`, every bit checked.
const UNSHARE_FLAGS: (u8, Width) = (0, Width::Full64);
/// `ioctl(2)`'s request: `unsigned int cmd`.
const IOCTL_REQUEST: (u8, Width) = (1, Width::Low32);

fn condition(
    (arg, width): (u8, Width),
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompCondition, String> {
    let len = match width {
        Width::Low32 => SeccompCmpArgLen::Dword,
        Width::Full64 => SeccompCmpArgLen::Qword,
    };
    SeccompCondition::new(arg, len, op, value).map_err(|e| e.to_string())
}

/// One rule per flag: "the argument has this bit set".
fn any_bit(arg: (u8, Width), bits: &[u64]) -> Result<Vec<SeccompRule>, String> {
    bits.iter()
        .map(|b| {
            SeccompRule::new(vec![condition(arg, SeccompCmpOp::MaskedEq(*b), *b)?])
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// `ioctl` with one of [`TERMINAL_INJECTION`] as its request.
fn terminal_injection() -> Result<Vec<SeccompRule>, String> {
    TERMINAL_INJECTION
        .iter()
        .map(|r| {
            SeccompRule::new(vec![condition(IOCTL_REQUEST, SeccompCmpOp::Eq, *r)?])
                .map_err(|e| e.to_string())
        })
        .collect()
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    mismatch: SeccompAction,
    matched: SeccompAction,
) -> Result<BpfProgram, String> {
    let filter = SeccompFilter::new(rules, mismatch, matched, target()?)
        .map_err(|e| format!("the system-call filter: {e}"))?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| format!("the system-call filter: {e}"))
}

/// The filters of `profile`, in the order they are installed (the kernel runs them all; for two
/// errors the later filter's wins): the allow-list of this architecture's calls, the refused
/// calls (`EPERM`), and for the unapproved profile `socket` (`EACCES`).
///
/// # Errors
/// An architecture without a filter, or a filter seccompiler refuses to build.
pub fn programs(profile: Profile) -> Result<Vec<BpfProgram>, String> {
    if !FILTER_AVAILABLE {
        return Err(format!(
            "no system-call filter for {}",
            std::env::consts::ARCH
        ));
    }
    let known: BTreeMap<i64, Vec<SeccompRule>> = (0..=HIGHEST_KNOWN)
        .filter(|n| *n != libc::SYS_clone3)
        .map(|n| (n, Vec::new()))
        .collect();
    let allow_list = compile(
        known,
        SeccompAction::Errno(libc::ENOSYS as u32),
        SeccompAction::Allow,
    )?;
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> = MOUNT_CALLS
        .iter()
        .chain(KERNEL_CALLS)
        .chain(match profile {
            Profile::Unapproved => UNAPPROVED_REFUSED,
            Profile::Approved => APPROVED_REFUSED,
        })
        .map(|n| (*n, Vec::new()))
        .collect();
    let mut out = vec![allow_list];
    // Typing into a terminal: never, approved or not (an approved command of a root daemon
    // could type into the owner's terminal past the controlling-terminal check).
    refused.insert(libc::SYS_ioctl, terminal_injection()?);
    if profile == Profile::Unapproved {
        refused.insert(libc::SYS_clone, any_bit(CLONE_FLAGS, NAMESPACE_FLAGS)?);
        let mut unshare_flags = NAMESPACE_FLAGS.to_vec();
        unshare_flags.push(CLONE_NEWTIME);
        refused.insert(libc::SYS_unshare, any_bit(UNSHARE_FLAGS, &unshare_flags)?);
    }
    out.push(compile(
        refused,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
    )?);
    if profile == Profile::Unapproved {
        let socket = [(libc::SYS_socket, Vec::new())].into_iter().collect();
        out.push(compile(
            socket,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EACCES as u32),
        )?);
    }
    Ok(out)
}

/// Install `profile`'s filters in the calling process (sets `PR_SET_NO_NEW_PRIVS` first). The
/// sandbox helper calls this last, just before `exec`.
///
/// # Errors
/// A filter that cannot be built or that the kernel refuses.
pub fn install(profile: Profile) -> Result<(), String> {
    for program in programs(profile)? {
        seccompiler::apply_filter(&program).map_err(|e| format!("seccomp: {e}"))?;
    }
    Ok(())
}

/// Drop every capability from the bounding set, so a command started by root gains none at
/// `exec` (no setting the clock or host name, no raw devices, no network administration).
/// Errors for capabilities the kernel does not know are ignored.
pub fn drop_capabilities_in_current_process() {
    for cap in 0..64 {
        // SAFETY: integer arguments only.
        unsafe {
            libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
        }
    }
}

/// A line for `ethan doctor`: the filter and what it refuses.
pub fn describe() -> String {
    if !FILTER_AVAILABLE {
        return format!(
            "no system-call filter on {} (x86_64 and aarch64 only)",
            std::env::consts::ARCH
        );
    }
    match (programs(Profile::Unapproved), programs(Profile::Approved)) {
        (Ok(u), Ok(a)) => format!(
            "seccomp allow-list (seccompiler, {} calls up to {HIGHEST_KNOWN}; x32 and other \
             architectures refused): {} BPF instructions for unapproved commands (no sockets, \
             io_uring, ptrace, mounts, namespaces, bpf, key rings), {} for approved ones (no \
             mounts, modules, kexec, bpf)",
            std::env::consts::ARCH,
            u.iter().map(Vec::len).sum::<usize>(),
            a.iter().map(Vec::len).sum::<usize>()
        ),
        (Err(e), _) | (_, Err(e)) => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_profiles_compile_within_the_kernels_limit() {
        for p in [Profile::Unapproved, Profile::Approved] {
            let progs = programs(p).unwrap();
            assert!(progs.iter().all(|p| !p.is_empty() && p.len() < 4096));
        }
        assert!(describe().contains("seccomp allow-list"), "{}", describe());
    }

    /// The errno of `call` in a child process with `profile`'s filters installed.
    fn errno_under(profile: Profile, call: fn() -> i64) -> i32 {
        let progs = programs(profile).unwrap();
        // SAFETY: the child only makes system calls (the filters are built already) and exits.
        match unsafe { libc::fork() } {
            0 => {
                let installed = progs.iter().all(|p| seccompiler::apply_filter(p).is_ok());
                let r = if installed { call() } else { 0 };
                let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
                // SAFETY: plain exit of the forked child.
                unsafe { libc::_exit(if installed && r < 0 { errno } else { 255 }) }
            }
            pid => {
                let mut status = 0;
                // SAFETY: waiting for our own child.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                libc::WEXITSTATUS(status)
            }
        }
    }

    #[test]
    fn arguments_are_compared_as_the_kernel_reads_them() {
        // SAFETY (all): system calls with integer arguments on a bad descriptor.
        fn tiocsti() -> i64 {
            unsafe { libc::syscall(libc::SYS_ioctl, -1, 0x5412u64, 0) }
        }
        fn tiocsti_high_bits() -> i64 {
            unsafe { libc::syscall(libc::SYS_ioctl, -1, 0x1_0000_5412u64, 0) }
        }
        fn tcgets_high_bits() -> i64 {
            unsafe { libc::syscall(libc::SYS_ioctl, -1, 0x1_0000_5401u64, 0) }
        }
        fn unshare_net_high_bits() -> i64 {
            unsafe { libc::syscall(libc::SYS_unshare, 0x100_0000_0000u64 | 0x4000_0000) }
        }
        for profile in [Profile::Unapproved, Profile::Approved] {
            assert_eq!(errno_under(profile, tiocsti), libc::EPERM, "{profile:?}");
            // ioctl reads its request as 32 bits: the high bits change nothing.
            assert_eq!(errno_under(profile, tiocsti_high_bits), libc::EPERM);
            assert_eq!(errno_under(profile, tcgets_high_bits), libc::EBADF);
        }
        assert_eq!(
            errno_under(Profile::Unapproved, unshare_net_high_bits),
            libc::EPERM
        );
    }
}
