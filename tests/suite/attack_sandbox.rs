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
//!   when it stops;
//! - a repository planted in the private temp folder runs no `diff.external` for a "safe"
//!   `git diff`; filling the private temp folder does not unseal the workspace's repository; a
//!   sealed repository cannot be swapped for a writable copy;
//! - a command ends when the daemon is killed; it writes no `/dev/shm` of the machine's;
//! - `TIOCSTI` with its high bits set is still refused, and in `ethan chat` an unapproved
//!   command cannot answer the next consent question;
//! - an approved command of a root daemon can change no kernel user-mode helper and read or
//!   make no block device;
//! - a command's output cannot pass for a setup error of the sandbox.

use super::sandbox::{gone, processes, unapproved, Rig};
use crate::support::{ScriptedModel, Step, TestHome};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

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
    let tmp = private_tmp(&mut rig).await;
    assert!(Path::new(&tmp).is_dir(), "{tmp}");
    assert!(!stale.exists(), "a dead daemon's temp folder was left");
    rig.daemon.stop();
    assert!(!Path::new(&tmp).exists(), "{tmp} was left behind");
}

/// The daemon's private temp folder, as a safe `echo` shows it.
async fn private_tmp(rig: &mut Rig) -> String {
    let r = rig
        .turn(&[("t", "shell", json!({"command": "echo TMP=$TMPDIR"}))], 0)
        .await;
    let line = r["t"]
        .lines()
        .find_map(|l| l.strip_prefix("TMP="))
        .unwrap_or_else(|| panic!("no TMPDIR: {}", r["t"]));
    line.trim().to_string()
}

fn asked(rig: &Rig) -> Vec<String> {
    rig.tg
        .sent_messages()
        .into_iter()
        .filter(|m| m["reply_markup"]["inline_keyboard"].is_array())
        .map(|m| m["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// No approval at all: `file_write` into the private temp folder needs none, and
/// `cd <tmp>/r && git diff --no-index a b` is classed safe. The folder is a bare repository
/// whose config names `diff.external = sh`: the command is shown that config with only the
/// settings that run no program, so git diffs and runs nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_safe_git_diff_runs_no_program_from_a_planted_config() {
    let mut rig = Rig::start(&[], None).await;
    let tmp = private_tmp(&mut rig).await;
    let repo = format!("{tmp}/r");
    let write = |id: &'static str, path: String, content: &str| {
        (id, "file_write", json!({"path": path, "content": content}))
    };
    let calls = [
        write("w1", format!("{repo}/HEAD"), "ref: refs/heads/main\n"),
        write(
            "w2",
            format!("{repo}/config"),
            "[core]\n\trepositoryformatversion = 0\n\tbare = true\n[diff]\n\texternal = sh\n",
        ),
        write("w3", format!("{repo}/objects/keep"), ""),
        write("w4", format!("{repo}/refs/keep"), ""),
        write(
            "w5",
            format!("{repo}/a"),
            "echo RAN-AS-CODE uid=$(id -u); touch \"$TMPDIR/ran-by-git-diff\"\n",
        ),
        write("w6", format!("{repo}/b"), "b\n"),
    ];
    let r = rig.turn(&calls, 0).await;
    for id in ["w1", "w2", "w5"] {
        assert!(r[id].contains("wrote"), "{id}: {}", r[id]);
    }
    let command = format!("cd {repo} && git diff --no-index a b; echo diff=$?");
    let r = rig
        .turn(&[("d", "shell", json!({ "command": command }))], 0)
        .await;
    let ran = Path::new(&tmp).join("ran-by-git-diff").exists();
    let questions = asked(&rig);
    rig.daemon.stop();
    // The diff itself shows the script's text; only a run prints `uid=` and a number.
    let ran_output = r["d"].lines().any(|l| {
        l.strip_prefix("RAN-AS-CODE uid=")
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
    });
    assert!(
        !ran_output && !ran,
        "a 'safe' git diff ran the model's script (approval requests: {questions:?}):\n{}",
        r["d"]
    );
}

/// A command fills the private temp folder with 20001 files, hoping the search for
/// repositories gives up before the workspace; the next one plants `commit.gpgSign` and
/// `gpg.program` for the owner's approved `git commit` to run. The workspace is searched first
/// and whole, so its repository stays read-only.
#[tokio::test(flavor = "multi_thread")]
async fn a_full_private_temp_folder_does_not_unseal_the_workspace_repository() {
    let mut rig = Rig::start(&[], None).await;
    let ws = rig.workspace();
    std::fs::create_dir_all(&ws).unwrap();
    let out = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let outside = tempfile::tempdir().unwrap();
    let marker = outside.path().join("gpg-program-ran");
    let fill = "python3 -c \"import os; d = os.environ['TMPDIR']; \
                [open(os.path.join(d, 'f%05d' % i), 'w').close() for i in range(20001)]\"; \
                echo filled=$?";
    let r = rig
        .turn(&[("f", "test_unapproved_shell", unapproved(fill))], 0)
        .await;
    assert!(r["f"].contains("filled=0"), "{}", r["f"]);
    let plant = format!(
        "printf '#!/bin/sh\\ntouch {}\\nexit 1\\n' > gpg.sh && chmod +x gpg.sh && \
         git config commit.gpgSign true && git config gpg.program \"$PWD/gpg.sh\"; \
         echo planted=$?",
        marker.display()
    );
    let r = rig
        .turn(&[("p", "test_unapproved_shell", unapproved(&plant))], 0)
        .await;
    let planted = r["p"].clone();
    let commit = "git -c user.name=o -c user.email=o@x commit -q --allow-empty -m x; \
                  echo commit=$?";
    let r = rig
        .turn(&[("c", "shell", json!({ "command": commit }))], 1)
        .await;
    let questions = asked(&rig);
    let config = std::fs::read_to_string(ws.join(".git/config")).unwrap();
    let ran = marker.exists();
    rig.daemon.stop();
    assert!(
        !config.contains("gpg.sh") && !ran,
        "planted: {planted}\nconfig:\n{config}\ncommit: {}\nthe approval said: {questions:?}\n\
         the planted gpg.program ran: {ran}",
        r["c"]
    );
}

/// A repository below the workspace is sealed by a mount on its `.git`; renaming its folder to
/// put a writable copy in its place fails, each folder on the way being a mount point.
#[tokio::test(flavor = "multi_thread")]
async fn a_sealed_repository_cannot_be_swapped_for_a_planted_copy() {
    let mut rig = Rig::start(&[], None).await;
    let inner = rig.workspace().join("sub/inner");
    std::fs::create_dir_all(&inner).unwrap();
    let out = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&inner)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let swap = "mv sub/inner sub/inner.orig && mkdir sub/inner && \
                cp -a sub/inner.orig/.git sub/inner/.git && \
                git -C sub/inner config core.sshCommand 'sh -c planted'; echo swapped=$?";
    let r = rig
        .turn(&[("s", "test_unapproved_shell", unapproved(swap))], 0)
        .await;
    let config = std::fs::read_to_string(inner.join(".git/config")).unwrap_or_default();
    rig.daemon.stop();
    assert!(
        !config.contains("planted"),
        "{}\nsub/inner/.git/config now:\n{config}",
        r["s"]
    );
}

/// When the daemon is killed, no timeout or `/stop` is left to end a command: the helper,
/// watching the daemon, ends it.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_ends_when_the_daemon_is_killed() {
    let mut rig = Rig::start(&[], None).await;
    rig.model.push_step(Step::tool_call(
        "k",
        "test_unapproved_shell",
        r#"{"command": "sleep 357", "timeout": 600}"#,
    ));
    rig.say("go");
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    while processes("sleep 357").is_empty() {
        assert!(std::time::Instant::now() < deadline, "never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    rig.daemon.kill();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let left = processes("sleep 357");
    let described: Vec<String> = left
        .iter()
        .map(|p| {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            format!("{p}: {}", cmd.chars().take(80).collect::<String>())
        })
        .collect();
    for p in &left {
        if let Ok(pid) = p.parse::<i32>() {
            // SAFETY: signalling a process this test started (through the daemon).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    assert!(left.is_empty(), "outlived the killed daemon: {described:?}");
}

/// A command without approval writes to `/dev/shm`: its own small one, gone with it, not the
/// machine's (which would outlive it and is sized to RAM).
#[tokio::test(flavor = "multi_thread")]
async fn an_unapproved_command_writes_nothing_to_dev_shm() {
    let mut rig = Rig::start(&[], None).await;
    let name = format!("/dev/shm/ethan-attack-{}", std::process::id());
    let r = rig
        .turn(
            &[(
                "s",
                "test_unapproved_shell",
                unapproved(&format!("echo planted > {name}; echo shm=$?")),
            )],
            0,
        )
        .await;
    rig.daemon.stop();
    let written = Path::new(&name).exists();
    let _ = std::fs::remove_file(&name);
    assert!(!written, "{name} was written: {}", r["s"]);
}

/// The kernel reads `ioctl`'s request as 32 bits: `TIOCSTI` with a high bit set is `TIOCSTI`,
/// and the filter compares it the same way.
const TIOCSTI: &str = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
m = os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY)
libc.grantpt(m); libc.unlockpt(m)
libc.ptsname.restype = ctypes.c_char_p
name = libc.ptsname(m).decode()
try:
    os.setsid()
except PermissionError:
    pass  # already a session leader: the sandbox gives each command a session of its own
s = os.open(name, os.O_RDWR)
c = ctypes.c_char(b"X")
for cmd in (0x5412, 0x100005412):
    r = libc.syscall(16, s, ctypes.c_ulong(cmd), ctypes.byref(c))
    print(hex(cmd), "->", r, os.strerror(ctypes.get_errno()) if r < 0 else "injected")
"#;

#[tokio::test(flavor = "multi_thread")]
async fn terminal_input_injection_is_refused_whatever_the_high_bits() {
    let mut rig = Rig::start(&[], None).await;
    let ws = rig.workspace();
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("tiocsti.py"), TIOCSTI).unwrap();
    let r = rig
        .turn(
            &[(
                "i",
                "test_unapproved_shell",
                unapproved("python3 tiocsti.py"),
            )],
            0,
        )
        .await;
    rig.daemon.stop();
    assert!(
        r["i"].contains("0x5412 -> -1 Operation not permitted"),
        "{}",
        r["i"]
    );
    assert!(!r["i"].contains("injected"), "{}", r["i"]);
}

/// In `ethan chat`, an unapproved command tries to type `y` into the owner's terminal with the
/// high-bit `TIOCSTI`, for the consent question of the model's next, dangerous command to read
/// as the owner's yes. The command has no controlling terminal, the filter refuses the request,
/// and the question drops input queued before it.
const INJECT_YES: &str = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
fd = os.open("/dev/tty", os.O_RDWR)
for ch in b"y\n":
    c = ctypes.c_char(bytes([ch]))
    r = libc.syscall(16, fd, ctypes.c_ulong(0x100005412), ctypes.byref(c))
print("typed", r)
"#;

#[tokio::test(flavor = "multi_thread")]
async fn an_unapproved_command_cannot_answer_the_terminals_consent_question() {
    use crate::support::daemon::{child_env, ethan_bin};
    let home = TestHome::new();
    let marker = home.path().join("approved-by-injection");
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "i",
            "test_unapproved_shell",
            r#"{"command": "python3 inject.py"}"#,
        ),
        Step::tool_call(
            "d",
            "shell",
            &json!({"command": format!("touch {}", marker.display())}).to_string(),
        ),
        Step::text("done-chat"),
    ])
    .await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-pty\n  name: test-model\n",
        model.base_url()
    ));
    let ws = home.path().join("workspace");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("inject.py"), INJECT_YES).unwrap();
    let home = tokio::task::spawn_blocking(move || {
        let mut cmd = std::process::Command::new(ethan_bin());
        cmd.arg("chat").env_clear().envs(child_env(
            std::env::vars_os(),
            home.path(),
            None,
            &[("TERM", "xterm")],
        ));
        let mut p = rexpect::session::spawn_command(cmd, Some(30_000)).expect("pty");
        p.exp_string("you> ").unwrap();
        p.send_line("go").unwrap();
        let seen = p.exp_string("done-chat");
        let _ = p.send_control('d');
        (home, seen.map_err(|e| e.to_string()))
    })
    .await
    .unwrap();
    let (_home, seen) = home;
    assert!(
        !marker.exists(),
        "the dangerous command ran on an injected 'y': {seen:?}"
    );
}

/// An approved command of a root daemon keeps its capabilities, but the kernel's user-mode
/// helpers (`core_pattern`, `modprobe`: a program set there runs as root outside every
/// namespace, where the hidden config is plain to read) are read-only, and no block device
/// (the disk under the hidden config) can be opened or made. (Opened and closed without
/// writing: the machine is shared.)
#[tokio::test(flavor = "multi_thread")]
async fn an_approved_command_cannot_reach_the_kernels_user_mode_helpers() {
    let mut rig = Rig::start(&[], None).await;
    let probe = r#"python3 -c "
import os, stat
for p in ('/proc/sys/kernel/core_pattern', '/proc/sys/kernel/modprobe', '/proc/sysrq-trigger'):
    try:
        os.close(os.open(p, os.O_WRONLY))
        print('OPENED FOR WRITING', p)
    except OSError as e:
        print('refused', p, e.strerror)
disks = sorted(n for n in os.listdir('/sys/block') if os.path.exists('/dev/' + n))
print('block devices:', len(disks))
for n in disks[-3:]:
    try:
        os.close(os.open('/dev/' + n, os.O_RDONLY))
        print('OPENED THE DISK', n)
    except OSError as e:
        print('refused', n, e.strerror)
try:
    os.mknod(os.environ['TMPDIR'] + '/disk', stat.S_IFBLK | 0o600, os.makedev(7, 0))
    print('MADE A DISK NODE')
except OSError as e:
    print('refused mknod', e.strerror)
""#;
    let r = rig
        .turn(&[("a", "shell", json!({ "command": probe }))], 1)
        .await;
    rig.daemon.stop();
    let out = &r["a"];
    for bad in ["OPENED FOR WRITING", "OPENED THE DISK", "MADE A DISK NODE"] {
        assert!(!out.contains(bad), "{out}");
    }
    assert!(
        out.contains("refused /proc/sys/kernel/core_pattern Read-only file system"),
        "{out}"
    );
    assert!(out.contains("refused mknod"), "{out}");
    // Each block device the kernel lists was refused (none, on a machine without one).
    let listed: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("block devices: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("the probe ran");
    assert_eq!(
        out.matches("Permission denied").count(),
        listed.min(3) + 1,
        "{out}"
    );
}

/// A command that prints what a setup error of the sandbox looks like and exits 125 is a
/// command's output all the same: the helper's own errors carry a tag the command never sees.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_cannot_pass_its_output_off_as_a_sandbox_setup_error() {
    let mut rig = Rig::start(&[], None).await;
    let fake = "echo SECRET-OUTPUT; echo 'ethan sandbox: unshare failed' >&2; \
                echo 'ethan sandbox [0123abcd]: unshare failed' >&2; exit 125";
    let r = rig
        .turn(&[("f", "test_unapproved_shell", unapproved(fake))], 0)
        .await;
    rig.daemon.stop();
    let out = &r["f"];
    assert!(out.contains("exit code: 125"), "{out}");
    assert!(out.contains("SECRET-OUTPUT"), "{out}");
    assert!(!out.contains("could not be set up"), "{out}");
}
