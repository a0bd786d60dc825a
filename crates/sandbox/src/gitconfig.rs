//! A repository's git config as a command without approval is shown it: only the settings that
//! never make git run a program ([`ethan_shell_classifier::git_setting_is_harmless`]: deny by
//! default), written back in a plain form git reads unambiguously. `diff.external`, a driver's
//! `textconv`, `filter.*`, `core.fsmonitor`, `gpg.program`, `include.path` and whatever a later
//! git adds are dropped.
//!
//! The parser is strict and small: a line it does not understand is dropped, never guessed. That
//! costs nothing in safety — only listed keys are ever written out, so a line read differently
//! than git would read it can at worst give a harmless key a wrong value.

use ethan_shell_classifier::git_setting_is_harmless;

/// The harmless settings of the config text `text`, as a config file.
pub fn sanitise(text: &str) -> String {
    let mut out = String::new();
    // The current section header, when its keys may be kept: (section, subsection).
    let mut section: Option<(String, Option<String>)> = None;
    let mut written: Option<(String, Option<String>)> = None;
    for raw in text.lines() {
        let mut line = raw.trim_start();
        if line.starts_with('[') {
            let Some((header, rest)) = parse_header(line) else {
                section = None;
                continue;
            };
            section = Some(header);
            line = rest.trim_start();
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let Some((s, sub)) = &section else { continue };
        let Some((key, value)) = parse_entry(line) else {
            continue;
        };
        if !git_setting_is_harmless(s, sub.as_deref(), &key) {
            continue;
        }
        if written.as_ref() != section.as_ref() {
            match sub {
                Some(sub) => out.push_str(&format!("[{s} \"{}\"]\n", escape(sub))),
                None => out.push_str(&format!("[{s}]\n")),
            }
            written = section.clone();
        }
        match value {
            Some(v) => out.push_str(&format!("\t{key} = \"{}\"\n", escape(&v))),
            None => out.push_str(&format!("\t{key}\n")),
        }
    }
    out
}

/// `[section]`, `[section "subsection"]` or `[section.subsection]`; returns the header and
/// what follows `]` on the line.
fn parse_header(line: &str) -> Option<((String, Option<String>), &str)> {
    let inner = line.strip_prefix('[')?;
    let end = inner.find(']')?;
    let (head, rest) = (&inner[..end], &inner[end + 1..]);
    let name_ok = |n: &str| {
        !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
    };
    if let Some((name, quoted)) = head.split_once(char::is_whitespace) {
        let sub = quoted.trim().strip_prefix('"')?.strip_suffix('"')?;
        // Escapes and quotes inside a subsection are not worth the risk of reading them wrong.
        if !name_ok(name) || name.contains('.') || sub.contains(['"', '\\', '\n']) {
            return None;
        }
        return Some(((name.to_ascii_lowercase(), Some(sub.to_string())), rest));
    }
    if !name_ok(head) {
        return None;
    }
    let header = match head.split_once('.') {
        // The deprecated `[section.subsection]`: the subsection is lower-cased by git.
        Some((s, sub)) => (s.to_ascii_lowercase(), Some(sub.to_ascii_lowercase())),
        None => (head.to_ascii_lowercase(), None),
    };
    Some((header, rest))
}

/// `key`, or `key = value` with git's quoting (`"…"`, `\\`, `\"`, `\n`, `\t`, `\b`) and
/// comments (`#`, `;` outside quotes). `None` for a line continued with a trailing backslash or
/// anything else not understood.
fn parse_entry(line: &str) -> Option<(String, Option<String>)> {
    let key_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .unwrap_or(line.len());
    let key = &line[..key_end];
    if !key.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    let rest = line[key_end..].trim_start();
    if rest.is_empty() || rest.starts_with('#') || rest.starts_with(';') {
        return Some((key.to_ascii_lowercase(), None));
    }
    let raw = rest.strip_prefix('=')?;
    let mut value = String::new();
    let mut pending_space = false;
    let mut quoted = false;
    let mut chars = raw.trim_start().chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => {
                let e = match chars.next()? {
                    'n' => '\n',
                    't' => '\t',
                    'b' => '\u{8}',
                    '\\' => '\\',
                    '"' => '"',
                    _ => return None,
                };
                if pending_space {
                    value.push(' ');
                    pending_space = false;
                }
                value.push(e);
                continue;
            }
            '#' | ';' if !quoted => break,
            c if c.is_whitespace() && !quoted => {
                pending_space = !value.is_empty();
                continue;
            }
            c => {
                if pending_space {
                    value.push(' ');
                    pending_space = false;
                }
                value.push(c);
            }
        }
    }
    if quoted {
        return None;
    }
    Some((key.to_ascii_lowercase(), Some(value)))
}

/// A value or subsection inside double quotes.
fn escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_harmless_settings_survive() {
        let planted = "[core]\n\trepositoryformatversion = 0\n\tbare = true\n\
                       \tfsmonitor = sh -c evil\n\tpager = evil\n[diff]\n\texternal = sh\n\
                       \trenames = true\n[diff \"x\"]\n\ttextconv = evil\n[filter \"lfs\"]\n\
                       \tclean = evil\n[include]\n\tpath = /tmp/evil\n\
                       [remote \"origin\"]\n\turl = git@example.com:a/b.git ; note\n\
                       \tvcs = evil\n[gpg]\n\tprogram = evil\n[branch.Main]\n\tmerge = refs/heads/main\n\
                       [color] ui = \"never\"\n";
        let out = sanitise(planted);
        assert!(!out.contains("evil"), "{out}");
        assert!(
            !out.contains("external") && !out.contains("textconv"),
            "{out}"
        );
        for kept in [
            "repositoryformatversion = \"0\"",
            "bare = \"true\"",
            "renames = \"true\"",
            "[remote \"origin\"]\n\turl = \"git@example.com:a/b.git\"",
            "[branch \"main\"]\n\tmerge = \"refs/heads/main\"",
            "[color]\n\tui = \"never\"",
        ] {
            assert!(out.contains(kept), "{kept:?} missing:\n{out}");
        }
    }

    #[test]
    fn what_is_not_understood_is_dropped() {
        // A continued line, an unknown escape, an unterminated quote, a header with escapes.
        let tricky = "[core]\n\tbare = tr\\\n[diff]\n\texternal = sh\n\
                      [core]\n\tabbrev = \\x41\n\tquotepath = \"on\n\
                      [remote \"a\\\"b\"]\n\turl = x\n[core] filemode = false\n";
        let out = sanitise(tricky);
        assert_eq!(out, "[core]\n\tfilemode = \"false\"\n", "{out}");
        // What is written is read back the same.
        assert_eq!(sanitise(&out), out);
        let odd = "[remote \"o\"]\n\turl = \"a \\\"b\\\" ; c\\\\d\"\n";
        let once = sanitise(odd);
        assert_eq!(once, "[remote \"o\"]\n\turl = \"a \\\"b\\\" ; c\\\\d\"\n");
        assert_eq!(sanitise(&once), once);
    }
}
