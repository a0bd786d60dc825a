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

use std::env;
use std::path::PathBuf;
use std::process::Command;

const FLAG: &str = "-Wl,-z,pack-relative-relocs";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=ETHAN_PACK_RELOCS");
    let pack = match env::var("ETHAN_PACK_RELOCS").as_deref() {
        Ok("0") => false,
        Ok("1") => true,
        _ => probe(),
    };
    if pack {
        println!("cargo:rustc-link-arg-bins={FLAG}");
    }
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
    let mut rustc = Command::new(env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()));
    rustc.arg("--target").arg(&target).arg("-o").arg(&exe);
    if let Ok(linker) = env::var("RUSTC_LINKER") {
        rustc.arg(format!("-Clinker={linker}"));
    }
    // The build's own flags (a linker, crt-static), so the probe links as the binary will.
    if let Ok(flags) = env::var("CARGO_ENCODED_RUSTFLAGS") {
        rustc.args(flags.split('\x1f').filter(|f| !f.is_empty()));
    }
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
