//! The packages as a user installs them: the `.deb` installed with `dpkg` on this machine and the
//! static binary from its tarball, each run against a loopback fake model.
//!
//! They need the packages built first, into the folder named by `ETHAN_TEST_PACKAGES`
//! (`packaging/build.sh --ci --out DIR`; `.ci/run` does both), and the `.deb` test needs root: it
//! installs, removes and purges the package, which creates the `ethan` user and the service's
//! folders. Without `ETHAN_TEST_PACKAGES` both say SKIPPED. The `.deb` test refuses to start on a
//! machine where Ethan is already installed or `/var/lib/ethan` exists (purging would delete it).

use crate::support::daemon::{run_program, CLI_TIMEOUT};
use crate::support::model::MODEL_ID;
use crate::support::{ScriptedModel, Step, TestHome};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const UNIT: &str = "/usr/lib/systemd/system/ethan.service";
const CONFIG: &str = "/etc/ethan/config.yaml";
const HOME: &str = "/var/lib/ethan";

/// The folder of built packages, or `None` after saying why the test is skipped.
fn packages_or_skip(test: &str) -> Option<PathBuf> {
    match std::env::var_os("ETHAN_TEST_PACKAGES") {
        Some(dir) => {
            Some(std::fs::canonicalize(&dir).unwrap_or_else(|e| {
                panic!("ETHAN_TEST_PACKAGES={}: {e}", Path::new(&dir).display())
            }))
        }
        None => {
            eprintln!(
                "SKIPPED {test}: set ETHAN_TEST_PACKAGES to the folder packaging/build.sh --ci \
                 --out DIR built (as root for the .deb: it installs the package)"
            );
            None
        }
    }
}

/// The one file in `dir` whose name starts with `prefix` and ends with `suffix`.
fn artefact(dir: &Path, prefix: &str, suffix: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with(prefix) && name.ends_with(suffix)
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one {prefix}*{suffix} in {}: {found:?}",
        dir.display()
    );
    found.into_iter().next().unwrap()
}

/// Runs `program args` with a bound of [`CLI_TIMEOUT`], from `/`, with `env` only (and `PATH`).
fn run(program: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let secs = CLI_TIMEOUT.as_secs().to_string();
    let mut cmd = Command::new("timeout");
    cmd.arg(secs).arg(program).args(args);
    cmd.current_dir("/").env_clear();
    cmd.env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
    cmd.envs(env.iter().copied());
    cmd.output()
        .unwrap_or_else(|e| panic!("{program} {args:?}: {e}"))
}

/// [`run`], failing with its output unless it succeeds; returns its stdout.
fn ok(program: &str, args: &[&str], env: &[(&str, &str)]) -> String {
    let out = run(program, args, env);
    assert!(
        out.status.success(),
        "{program} {args:?}: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The environment the unit gives the service: its user's, `ETHAN_HOME` from `Environment=`.
fn service_env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("HOME", HOME),
        ("USER", "ethan"),
        ("ETHAN_HOME", HOME),
        ("NO_COLOR", "1"),
        ("NO_PROXY", "127.0.0.1,localhost"),
    ]
}

/// The arguments of `setpriv` that run a command as the user `ethan` (as `User=`/`Group=`).
const AS_ETHAN: [&str; 4] = ["--reuid=ethan", "--regid=ethan", "--init-groups", "--"];

/// `ethan ARGS` run as the service runs it: the user `ethan` and the unit's environment.
fn as_ethan(args: &[&str]) -> Output {
    let mut all: Vec<&str> = AS_ETHAN.to_vec();
    all.push("/usr/bin/ethan");
    all.extend_from_slice(args);
    run("setpriv", &all, &service_env())
}

/// (owner, group, mode with the file type bits removed) of `path`.
fn owner_group_mode(path: &str) -> (String, String, u32) {
    let m = std::fs::metadata(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let name = |db: &str, id: u32| {
        ok("getent", &[db, &id.to_string()], &[])
            .split(':')
            .next()
            .unwrap_or_default()
            .to_string()
    };
    (
        name("passwd", m.uid()),
        name("group", m.gid()),
        m.mode() & 0o7777,
    )
}

/// The value of the first `Key=` line of the unit.
fn unit_value<'a>(unit: &'a str, key: &str) -> &'a str {
    unit.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {key}= in the unit:\n{unit}"))
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// The example config as shipped, its model's endpoint `base_url` and its fallback chain (a
/// cloud model and a local one) left out. Each change must apply once: a changed example config
/// fails here rather than silently testing something else.
fn example_config_for(base_url: &str) -> String {
    let example = std::fs::read_to_string("/usr/share/doc/ethan/config.example.yaml")
        .expect("the example config in the package's docs");
    let mut out = Vec::new();
    let (mut base, mut fallback) = (0, 0);
    let mut skipping = false;
    for line in example.lines() {
        if skipping {
            // The entries (and their comments) are indented deeper than `  fallback:`.
            if line.starts_with("    ") || line.trim_start().starts_with('#') {
                continue;
            }
            skipping = false;
        }
        match line {
            "  base_url: https://api.openai.com/v1" => {
                base += 1;
                out.push(format!("  base_url: {base_url}"));
            }
            "  fallback:" => {
                fallback += 1;
                skipping = true;
                out.push("  fallback: []".to_string());
            }
            _ => out.push(line.to_string()),
        }
    }
    assert_eq!(
        (base, fallback),
        (1, 1),
        "the example config's model section changed"
    );
    out.join("\n") + "\n"
}

#[tokio::test(flavor = "multi_thread")]
async fn the_deb_installs_a_service_that_runs_as_ethan_and_removing_it_keeps_the_data() {
    let Some(dir) = packages_or_skip("the_deb_installs_a_service…") else {
        return;
    };
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "installing the .deb needs root"
    );
    assert!(
        !run("dpkg", &["-s", "ethan"], &[]).status.success() && !Path::new(HOME).exists(),
        "Ethan is installed here (or {HOME} exists): this test installs and purges the package; \
         run it on a machine without Ethan (CI)"
    );
    let deb = artefact(&dir, "ethan_", ".deb");
    ok("dpkg", &["-i", deb.to_str().unwrap()], &[]);

    // The user: a system account, no login shell, /var/lib/ethan its home.
    let passwd = ok("getent", &["passwd", "ethan"], &[]);
    let fields: Vec<&str> = passwd.trim().split(':').collect();
    assert!(
        fields[2].parse::<u32>().unwrap() < 1000,
        "a system uid: {passwd}"
    );
    assert_eq!(
        (fields[5], fields[6]),
        (HOME, "/usr/sbin/nologin"),
        "{passwd}"
    );
    ok("getent", &["group", "ethan"], &[]);

    // The files and folders.
    assert_eq!(
        owner_group_mode("/usr/bin/ethan"),
        ("root".into(), "root".into(), 0o755)
    );
    assert_eq!(
        owner_group_mode(HOME),
        ("ethan".into(), "ethan".into(), 0o700)
    );
    assert_eq!(
        owner_group_mode("/etc/ethan"),
        ("root".into(), "ethan".into(), 0o2750)
    );
    for doc in [
        "copyright",
        "changelog.Debian.gz",
        "config.example.yaml",
        "README.md",
    ] {
        let p = format!("/usr/share/doc/ethan/{doc}");
        assert!(Path::new(&p).is_file(), "{p} missing");
    }
    let copyright = std::fs::read_to_string("/usr/share/doc/ethan/copyright").unwrap();
    assert!(copyright.contains("MIT License"), "{copyright}");

    // The unit: valid for systemd, and the service it describes.
    ok("systemd-analyze", &["verify", UNIT], &[]);
    let unit = std::fs::read_to_string(UNIT).unwrap();
    assert_eq!(unit_value(&unit, "User"), "ethan");
    assert_eq!(
        unit_value(&unit, "Environment"),
        format!("ETHAN_HOME={HOME}")
    );
    assert_eq!(unit_value(&unit, "ReadWritePaths"), HOME);
    let exec_start = unit_value(&unit, "ExecStart");
    assert_eq!(exec_start, format!("/usr/bin/ethan --config {CONFIG} run"));
    // Removing the package stops the service first (when systemd runs; it does not in CI).
    let prerm = std::fs::read_to_string("/var/lib/dpkg/info/ethan.prerm").unwrap();
    assert!(
        prerm.contains("deb-systemd-invoke stop ethan.service"),
        "{prerm}"
    );

    // What the package's description says to do: `ethan init --config /etc/ethan/config.yaml`
    // as root writes a config the service's user may read and not change.
    // The example config's model (gpt-4o-mini) is not in the fake's list: `doctor` asks it for
    // one token then.
    let model = ScriptedModel::start(vec![Step::text("O")]).await;
    let base_url = model.base_url();
    let init = [
        "init",
        "--yes",
        "--config",
        CONFIG,
        "--model-base-url",
        &base_url,
        "--model-name",
        MODEL_ID,
    ];
    let said = ok(
        "/usr/bin/ethan",
        &init,
        &[("ETHAN_HOME", HOME), ("NO_COLOR", "1")],
    );
    assert!(said.contains("its group ethan may read it"), "{said}");
    // The next steps it prints are run as the service's user with its home.
    let doctor_line = format!("sudo -u ethan ETHAN_HOME={HOME} ethan --config {CONFIG} doctor");
    assert!(said.contains(&doctor_line), "{said}");
    assert!(said.contains("sudo systemctl enable --now ethan"), "{said}");
    assert_eq!(
        owner_group_mode(CONFIG),
        ("root".into(), "ethan".into(), 0o640)
    );

    // `ethan doctor` as the service would run it.
    let out = tokio::task::spawn_blocking(|| as_ethan(&["--config", CONFIG, "doctor"]))
        .await
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        report.contains(&format!("ok    store: sqlite {HOME}/ethan.db")),
        "{report}"
    );
    assert!(report.contains("ok    model: "), "{report}");
    assert_eq!(owner_group_mode(&format!("{HOME}/ethan.db")).0, "ethan");
    // The config cannot be changed by the service's user.
    let touch = run(
        "setpriv",
        &[&AS_ETHAN[..], &["touch", CONFIG][..]].concat(),
        &[],
    );
    assert!(!touch.status.success(), "ethan could write {CONFIG}");

    // The service's command line starts and serves the gateway as ethan (what `systemctl enable
    // --now ethan` starts; CI has no systemd to start it).
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut env = service_env();
    env.push(("ETHAN__GATEWAY__LISTEN", &listen));
    let mut daemon = Command::new("setpriv")
        .args(AS_ETHAN)
        .args(exec_start.split(' '))
        .current_dir("/")
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .envs(env)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let healthz = format!("http://{listen}/healthz");
    let mut healthy = false;
    for _ in 0..150 {
        if reqwest::get(&healthz)
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            healthy = true;
            break;
        }
        if daemon.try_wait().unwrap().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // SAFETY: kill with a pid of our own child and a valid signal.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    let stopped = tokio::task::spawn_blocking(move || daemon.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&stopped.stderr);
    assert!(healthy, "the service never answered {healthz}:\n{stderr}");
    assert!(stopped.status.success(), "{}: {stderr}", stopped.status);

    // The shipped example config, pointed at the fake model, passes `ethan doctor` as well.
    std::fs::write(CONFIG, example_config_for(&base_url)).unwrap();
    let out = tokio::task::spawn_blocking(|| as_ethan(&["--config", CONFIG, "doctor"]))
        .await
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("ok    model: "), "{report}");
    assert_eq!(
        model.models_calls(),
        3,
        "init and each doctor asked the fake's model list"
    );
    assert_eq!(
        model.requests().len(),
        1,
        "one token, for the model it does not list"
    );
    model.assert_protocol_ok();

    // Removing keeps the data and the config; purging removes both.
    ok("dpkg", &["-r", "ethan"], &[]);
    assert!(!Path::new("/usr/bin/ethan").exists() && !Path::new(UNIT).exists());
    assert!(
        Path::new(&format!("{HOME}/ethan.db")).is_file(),
        "remove kept the data"
    );
    assert!(Path::new(CONFIG).is_file(), "remove kept the config");
    ok("dpkg", &["-P", "ethan"], &[]);
    assert!(!Path::new(HOME).exists() && !Path::new("/etc/ethan").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_static_binary_links_nothing_and_answers_a_chat() {
    let Some(dir) = packages_or_skip("the_static_binary_links_nothing_and_answers_a_chat") else {
        return;
    };
    let tarball = artefact(&dir, "ethan-", "-x86_64-unknown-linux-musl.tar.gz");
    let home = TestHome::new();
    let unpacked = home.path().join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    ok(
        "tar",
        &[
            "-xzf",
            tarball.to_str().unwrap(),
            "-C",
            unpacked.to_str().unwrap(),
            "--strip-components=1",
        ],
        &[],
    );
    for f in [
        "LICENSE",
        "README.md",
        "config.example.yaml",
        "systemd/ethan.service",
    ] {
        assert!(unpacked.join(f).is_file(), "{f} missing from the tarball");
    }
    let bin = unpacked.join("ethan");
    let bin = bin.to_str().unwrap().to_string();

    // glibc's ldd on a static executable: "not a dynamic executable" (exit 1), or "statically
    // linked" for a static PIE.
    let ldd = run("ldd", &[&bin], &[]);
    let said =
        String::from_utf8_lossy(&ldd.stdout).into_owned() + &String::from_utf8_lossy(&ldd.stderr);
    assert!(
        said.contains("not a dynamic executable") || said.contains("statically linked"),
        "ldd: {said}"
    );

    let version = ok(&bin, &["--version"], &[]);
    assert_eq!(
        version.trim(),
        format!("ethan {}", env!("CARGO_PKG_VERSION"))
    );

    let model = ScriptedModel::start(vec![Step::text("Hello from the model.")]).await;
    std::fs::write(
        home.config_path(),
        format!(
            "model:\n  base_url: {}\n  name: {MODEL_ID}\n",
            model.base_url()
        ),
    )
    .unwrap();
    let out = tokio::task::spawn_blocking(move || {
        let out = run_program(&home, &bin, &["chat", "-m", "hi"], None, &[], CLI_TIMEOUT);
        (out, home)
    })
    .await
    .unwrap()
    .0;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Hello from the model."), "{stdout}");
    assert_eq!(model.requests().len(), 1);
    model.assert_protocol_ok();
}
