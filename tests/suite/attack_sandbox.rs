//! The shell sandbox against a determined command, through the real daemon, the fake Bot API and
//! the scripted model, beyond the attacks of `sandbox.rs` (each test is an attack that failed):
//! - a command without approval gets no socket of any family, no namespace of any kind, none
//!   of the kernel interfaces the filter refuses (key rings, `bpf`, `userfaultfd`, perf, mount
//!   calls, file handles, module loading, `kexec`, `ptrace`, `process_vm_*`), and no x32 or
//!   unknown call number;
//! - the hidden config stays out of reach through `..`, `/proc/self/root`, `/proc/1/cwd`, an
//!   `O_PATH` descriptor and, for an approved command, through unmounting the hiding `tmpfs`;
//! - a daemonised child (double fork, `setsid`, SIGTERM and SIGHUP ignored, a child subreaper),
//!   a disowned job under another name and a `script` pseudo-terminal are gone when the command
//!   returns;
//! - a sealed `.git` can be neither moved, removed, hard-linked nor written (config,
//!   `info/attributes`, hooks);
//! - a dead daemon's private temp folder is swept at start, and the daemon's own is removed
//!   when it stops.

use super::sandbox::{gone, unapproved, Rig};
use serde_json::json;
use std::path::Path;

/// Every call a command without approval must not make, with what it got.
const PROBE: &str = r#"
import ctypes, os, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(name, nr, *args):
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    print(name, "->", r, os.strerror(ctypes.get_errno()) if r < 0 else "ALLOWED")
families = [("inet", 2), ("inet6", 10), ("netlink", 16), ("packet", 17), ("alg", 38),
            ("vsock", 40), ("unix", 1), ("bluetooth", 31), ("can", 29), ("xdp", 44)]
for name, fam in families:
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_RAW):
        try:
            socket.socket(fam, kind, 0).close()
            print("socket", name, kind, "-> ALLOWED")
        except OSError as e:
            print("socket", name, kind, "->", e.strerror)
for flag, name in ((0x10000000, "user"), (0x20000, "mnt"), (0x20000000, "pid"),
                   (0x40000000, "net"), (0x08000000, "ipc"), (0x04000000, "uts"),
                   (0x02000000, "cgroup"), (0x80, "time")):
    sc("unshare-" + name, 272, flag)
    sc("clone-" + name, 56, flag | 17, 0, 0, 0, 0) if name != "time" else None
sc("setns", 308, 0, 0)
sc("keyctl", 250, 0, 0)
sc("add_key", 248, 0, 0, 0, 0, 0)
sc("request_key", 249, 0, 0, 0, 0)
sc("bpf", 321, 0, 0, 0)
sc("userfaultfd", 323, 0)
sc("perf_event_open", 298, 0, 0, -1, -1, 0)
sc("io_uring_setup", 425, 4, 0)
sc("io_uring_enter", 426, 0, 0, 0, 0, 0, 0)
sc("io_uring_register", 427, 0, 0, 0, 0)
sc("mount", 165, 0, 0, 0, 0, 0)
sc("umount2", 166, 0, 0)
sc("pivot_root", 155, 0, 0)
sc("fsopen", 430, 0, 0)
sc("fsmount", 432, 0, 0, 0)
sc("fspick", 433, -100, 0, 0)
sc("open_tree", 428, -100, 0, 0)
sc("move_mount", 429, -100, 0, -100, 0, 0)
sc("mount_setattr", 442, -100, 0, 0, 0, 0)
sc("name_to_handle_at", 303, -100, 0, 0, 0, 0)
sc("open_by_handle_at", 304, -100, 0, 0)
sc("pidfd_getfd", 438, 0, 0, 0)
sc("init_module", 175, 0, 0, 0)
sc("finit_module", 313, 0, 0, 0)
sc("kexec_load", 246, 0, 0, 0, 0)
sc("kexec_file_load", 320, 0, 0, 0, 0, 0)
sc("ptrace", 101, 16, 1, 0, 0)
sc("process_vm_readv", 310, 1, 0, 0, 0, 0, 0)
sc("process_vm_writev", 311, 1, 0, 0, 0, 0, 0)
sc("x32-socket", 0x40000000 | 41, 1, 1, 0)
sc("x32-io_uring_setup", 0x40000000 | 425, 4, 0)
sc("x32-ptrace", 0x40000000 | 521, 16, 1, 0, 0)
sc("unknown-470", 470)
sc("unknown-1023", 1023)
sc("clone3", 435, 0, 0)
"#;

#[tokio::test(flavor = "multi_thread")]
async fn no_socket_namespace_or_refused_kernel_interface_is_open_without_approval() {
    let mut rig = Rig::start(&[], None).await;
    let ws = rig.workspace();
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("probe.py"), PROBE).unwrap();
    let r = rig
        .turn(
            &[("p", "test_unapproved_shell", unapproved("python3 probe.py"))],
            0,
        )
        .await;
    rig.daemon.stop();
    let out = &r["p"];
    let lines: Vec<&str> = out.lines().filter(|l| l.contains(" -> ")).collect();
    assert!(lines.len() >= 79, "the probe did not run through:\n{out}");
    for line in lines {
        assert!(!line.contains("ALLOWED"), "{line}\n{out}");
        let expected = if line.starts_with("socket") {
            "Permission denied"
        } else if line.starts_with("x32")
            || line.starts_with("unknown")
            || line.starts_with("clone3")
        {
            "Function not implemented"
        } else {
            "Operation not permitted"
        };
        assert!(line.ends_with(expected), "{line}\n{out}");
    }
}

/// Reads of the config from every angle; none may show what is in it.
const READ_CONFIG: &str = r#"
import os, sys
home = os.path.dirname(os.getcwd())
name = "con" + "fig.yaml"
tries = [os.path.join(home, name), "/proc/self/root" + home + "/" + name,
         "/proc/1/cwd/../" + name, "/proc/self/cwd/../" + name]
fd = os.open(".", os.O_PATH)
tries.append("/proc/self/fd/%d/../%s" % (fd, name))
for path in tries:
    try:
        print("READ", path, open(path).read())
    except OSError as e:
        print("refused", path, e.strerror)
try:
    up = os.open("..", os.O_RDONLY)
    print("listing of the parent:", os.listdir(up))
except OSError as e:
    print("refused listing", e.strerror)
if len(sys.argv) > 1:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    r = libc.umount2(home.encode(), 2)
    print("umount2 ->", r, os.strerror(ctypes.get_errno()))
    r = libc.mount(b"none", home.encode(), b"tmpfs", 0, None)
    print("mount ->", r, os.strerror(ctypes.get_errno()))
    try:
        print("READ after umount", open(os.path.join(home, name)).read())
    except OSError as e:
        print("refused after umount", e.strerror)
"#;

#[tokio::test(flavor = "multi_thread")]
async fn the_hidden_config_stays_hidden_through_proc_descriptors_and_unmounting() {
    let mut rig = Rig::start(&[], None).await;
    let ws = rig.workspace();
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("read.py"), READ_CONFIG).unwrap();
    let r = rig
        .turn(
            &[
                (
                    "u",
                    "test_unapproved_shell",
                    unapproved("python3 read.py; cat ../config.yaml; cd .. && ls -a"),
                ),
                ("a", "shell", json!({"command": "python3 read.py unmount"})),
            ],
            1,
        )
        .await;
    rig.daemon.stop();
    for id in ["u", "a"] {
        let out = &r[id];
        assert!(
            !out.contains("READ") && !out.contains("owners:") && !out.contains("base_url"),
            "{id} read the config:\n{out}"
        );
        assert_eq!(out.matches("refused /").count(), 5, "{id}:\n{out}");
        assert!(
            out.contains("listing of the parent: ['workspace']"),
            "{id}:\n{out}"
        );
    }
    assert!(
        r["a"].contains("umount2 -> -1 Operation not permitted")
            && r["a"].contains("mount -> -1 Operation not permitted")
            && r["a"].contains("refused after umount"),
        "{}",
        r["a"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn daemonised_renamed_and_pty_children_are_gone_when_the_command_returns() {
    let mut rig = Rig::start(&[], None).await;
    let daemonise = "python3 -c \"\nimport ctypes, os, signal\n\
                     ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)\n\
                     if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        \
                     signal.signal(signal.SIGTERM, signal.SIG_IGN)\n        \
                     signal.signal(signal.SIGHUP, signal.SIG_IGN)\n        \
                     open('up-367', 'w').close()\n        \
                     os.execvp('sleep', ['sleep', '367'])\n    os._exit(0)\n\" \
                     >/dev/null 2>&1; \
                     (trap '' HUP TERM; touch up-368; exec -a hidden-sleep sleep 368) \
                     >/dev/null 2>&1 & disown; \
                     script -qc 'touch up-369; sleep 369' /dev/null >/dev/null 2>&1 & \
                     for i in $(seq 100); do [ -e up-367 ] && [ -e up-368 ] && [ -e up-369 ] \
                     && break; sleep 0.05; done; ls up-*; echo started";
    let r = rig
        .turn(&[("d", "test_unapproved_shell", unapproved(daemonise))], 0)
        .await;
    assert!(
        r["d"].contains("up-367\nup-368\nup-369\nstarted"),
        "{}",
        r["d"]
    );
    for needle in ["sleep 367", "hidden-sleep 368", "sleep 369"] {
        gone(needle).await;
    }
    rig.daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sealed_git_cannot_be_moved_removed_linked_or_written() {
    let mut rig = Rig::start(&[], None).await;
    let ws = rig.workspace();
    std::fs::create_dir_all(&ws).unwrap();
    let out = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let config = std::fs::read_to_string(ws.join(".git/config")).unwrap();
    let hooks: Vec<_> = std::fs::read_dir(ws.join(".git/hooks"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    let attack = "mv .git .git-moved; echo mv=$?; rm -rf .git; echo rm=$?; \
                  ln .git/config cfg; echo ln=$?; \
                  git config core.sshCommand evil; echo config=$?; \
                  mkdir -p .git/info; echo '* filter=x' > .git/info/attributes; echo attr=$?; \
                  touch .git/hooks/post-checkout; echo hook=$?; \
                  cp /bin/true .git/hooks/pre-push; echo cp=$?";
    let r = rig
        .turn(&[("g", "test_unapproved_shell", unapproved(attack))], 0)
        .await;
    rig.daemon.stop();
    let out = &r["g"];
    for step in ["mv", "rm", "ln", "config", "attr", "hook", "cp"] {
        assert!(
            !out.contains(&format!("{step}=0")),
            "{step} went through:\n{out}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(ws.join(".git/config")).unwrap(),
        config
    );
    let after: Vec<_> = std::fs::read_dir(ws.join(".git/hooks"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(after, hooks);
    assert!(!ws.join(".git/info/attributes").exists() && !ws.join("cfg").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn private_temp_folders_are_swept_at_start_and_removed_at_stop() {
    // Pid 2^22+ is above the kernel's largest pid: a daemon that is gone.
    let stale = std::env::temp_dir().join("ethan-4194998-0badc0de");
    std::fs::create_dir_all(stale.join("left/behind")).unwrap();
    let mut rig = Rig::start(&[], None).await;
    let r = rig
        .turn(&[("t", "shell", json!({"command": "echo TMP=$TMPDIR"}))], 0)
        .await;
    let tmp = r["t"]
        .lines()
        .find_map(|l| l.strip_prefix("TMP="))
        .unwrap_or_else(|| panic!("{}", r["t"]))
        .trim()
        .to_string();
    assert!(Path::new(&tmp).is_dir(), "{tmp}");
    assert!(!stale.exists(), "a dead daemon's temp folder was left");
    rig.daemon.stop();
    assert!(!Path::new(&tmp).exists(), "{tmp} was left behind");
}
