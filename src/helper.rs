//! The daemon's binary started again as a helper (`ethan __ethan-sandbox-helper MODE [SPEC]`):
//! `shell` runs one command in the sandbox ([`crate::sandbox::helper`], its specification on
//! standard input), `parse` reads one
//! untrusted file under resource limits ([`crate::media::parse`]), `probe` reports which
//! namespaces commands get. `main` calls [`main_if_helper`] before anything else.

use crate::sandbox::helper::{self, HELPER_ARG};
use std::ffi::OsString;

/// When this process was started as the helper (`argv[1]` is [`HELPER_ARG`]), run it and
/// exit; otherwise return.
pub fn main_if_helper() {
    let mut args = std::env::args_os();
    if args.nth(1).as_deref() != Some(std::ffi::OsStr::new(HELPER_ARG)) {
        return;
    }
    let rest: Vec<OsString> = args.collect();
    let mode = rest.first().and_then(|m| m.to_str()).unwrap_or("");
    let spec = rest.get(1).and_then(|s| s.to_str()).unwrap_or("");
    let code = match mode {
        "shell" => match helper::read_spec() {
            Ok(s) => helper::shell_main(&s),
            Err(e) => helper::setup_failed(None, &e),
        },
        "parse" => crate::media::parse::child_main(spec),
        "probe" => {
            let report = helper::probe_here();
            println!("{}", serde_json::to_string(&report).unwrap_or_default());
            0
        }
        _ => helper::setup_failed(None, &format!("unknown mode {mode:?}")),
    };
    std::process::exit(code);
}

/// The unit tests start the helper from the test binary.
#[cfg(test)]
#[ctor::ctor(unsafe)]
fn helper_in_unit_tests() {
    main_if_helper();
}
