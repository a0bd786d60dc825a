//! Build script: packs the executable's relative relocations (`-z pack-relative-relocs`, the
//! `DT_RELR` format) when the toolchain and the C library of this build can do it.
//!
//! A position-independent executable carries one relocation for every pointer in its read-only
//! data (vtables, string tables); in the default format each takes 24 bytes in `.rela.dyn`, which
//! the dynamic loader reads at every start. Packed, they take a few kilobytes: the binary is some
//! 1.8 MiB smaller and those pages are never read (BENCHMARKS.md, "Binary size"). An executable
//! linked so needs glibc 2.36 or newer (the linker adds the version `GLIBC_ABI_DT_RELR`, which an
//! older glibc refuses with a clear error at start), so the flag is only added when a probe program
//! linked with it runs on this machine: the build machine's glibc is then new enough, and a
//! binary built here runs where that glibc does. Never when cross-compiling (the probe cannot run)
//! and never for musl, whose static start-up code may predate `DT_RELR`.
//!
//! `ETHAN_PACK_RELOCS=0` turns it off for a binary meant for an older glibc; `=1` adds the flag
//! without the probe (README, "Building").
//!
//! Release builds also lay out the functions the daemon runs while idle and in a turn first in
//! `.text`, in the order of `packaging/hot-functions.order` (`--symbol-ordering-file`), when the
//! linker takes that option (LLD, Rust's default linker on x86-64 Linux, and mold do; GNU ld does
//! not, and the probe then leaves it out). Those functions are some 2 MiB of the 10 MiB of code,
//! spread over the whole of it otherwise: the kernel maps the executable's pages in large pieces,
//! so an idle daemon kept 7 MiB of code resident for the 0.6 MiB it runs (BENCHMARKS.md,
//! "Hot functions first"). A name the build does not have is skipped; `benches/hot-order.sh`
//! writes the file again. `ETHAN_ORDER_FUNCTIONS=0` turns it off.

use std::env;
use std::path::PathBuf;
use std::process::Command;

const FLAG: &str = "-Wl,-z,pack-relative-relocs";
/// The symbol ordering file, relative to the package.
const ORDER: &str = "packaging/hot-functions.order";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={ORDER}");
    println!("cargo:rerun-if-env-changed=ETHAN_PACK_RELOCS");
    println!("cargo:rerun-if-env-changed=ETHAN_ORDER_FUNCTIONS");
    order_functions();
    let pack = match env::var("ETHAN_PACK_RELOCS").as_deref() {
        Ok("0") => false,
        Ok("1") => true,
        _ => probe(),
    };
    if pack {
        println!("cargo:rustc-link-arg-bins={FLAG}");
    }
}

/// In a release build, the link flags that lay out the hot functions first, when the linker
/// links a program with them.
fn order_functions() {
    let var = |name: &str| env::var(name).unwrap_or_default();
    if var("PROFILE") != "release" || var("ETHAN_ORDER_FUNCTIONS") == "0" {
        return;
    }
    let Some(file) = env::var_os("CARGO_MANIFEST_DIR").map(|d| PathBuf::from(d).join(ORDER)) else {
        return;
    };
    if !file.is_file() {
        return;
    }
    let flags = [
        format!("-Wl,--symbol-ordering-file={}", file.display()),
        // Names of another build (a toolchain or dependency changed) are skipped quietly.
        "-Wl,--no-warn-symbol-ordering".to_string(),
    ];
    if links_with(&flags) {
        for flag in flags {
            println!("cargo:rustc-link-arg-bins={flag}");
        }
    }
}

/// Whether a small program links with `flags` the way this build links.
fn links_with(flags: &[String]) -> bool {
    let Some(out) = env::var_os("OUT_DIR").map(PathBuf::from) else {
        return false;
    };
    let source = out.join("order_probe.rs");
    let exe = out.join("order_probe");
    if std::fs::write(&source, "fn main() {}\n").is_err() {
        return false;
    }
    let mut rustc = probe_rustc(&exe);
    for flag in flags {
        rustc.arg(format!("-Clink-arg={flag}"));
    }
    let linked = rustc
        .arg(&source)
        .output()
        .is_ok_and(|o| o.status.success());
    let _ = std::fs::remove_file(&exe);
    linked
}

/// `rustc` for this build's target and linker, writing `exe`.
fn probe_rustc(exe: &std::path::Path) -> Command {
    let mut rustc = Command::new(env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()));
    rustc
        .arg("--target")
        .arg(env::var("TARGET").unwrap_or_default())
        .arg("-o")
        .arg(exe);
    if let Ok(linker) = env::var("RUSTC_LINKER") {
        rustc.arg(format!("-Clinker={linker}"));
    }
    // The build's own flags (a linker, crt-static), so the probe links as the binary will.
    if let Ok(flags) = env::var("CARGO_ENCODED_RUSTFLAGS") {
        rustc.args(flags.split('\x1f').filter(|f| !f.is_empty()));
    }
    rustc
}

/// Whether a program linked with the flag, the way this build links, starts here.
fn probe() -> bool {
    let var = |name: &str| env::var(name).unwrap_or_default();
    let (target, host) = (var("TARGET"), var("HOST"));
    if target != host
        || var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
    {
        return false;
    }
    let Some(out) = env::var_os("OUT_DIR").map(PathBuf::from) else {
        return false;
    };
    let source = out.join("relr_probe.rs");
    let exe = out.join("relr_probe");
    // A pointer in static data, so the probe has a relative relocation to pack.
    let program =
        "static S: &str = \"relr\";\nfn main() { std::process::exit(S.len() as i32 - 4) }\n";
    if std::fs::write(&source, program).is_err() {
        return false;
    }
    let mut rustc = probe_rustc(&exe);
    rustc.arg(format!("-Clink-arg={FLAG}")).arg(&source);
    let linked = rustc.output().is_ok_and(|o| o.status.success());
    let runs = linked && Command::new(&exe).status().is_ok_and(|s| s.success());
    let _ = std::fs::remove_file(&exe);
    if !runs {
        println!(
            "cargo:warning=relative relocations not packed: the linker or this machine's glibc \
             (2.36 or newer needed) cannot; the binary is some 1.8 MiB larger"
        );
    }
    runs
}
