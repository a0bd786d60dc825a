//! Unit tests of the classifier's parts (brace expansion, globs, ANSI-C quotes, `sed` and `chmod`
//! rules, the checks before the parser) and of rules best shown on a few commands. The corpus of
//! commands with their expected class is the integration test `tests/corpus.rs`.

use crate::parse::{has_oversized_fd_number, has_oversized_tilde_number};
use crate::walk::commands::files::dangerous_mode;
use crate::walk::commands::interpreters::sed_executes;
use crate::words::{brace_expand, compile_glob, decode_ansi_c, glob_match, Arg, Kind};
use crate::{classify, Classification, ShellClass};

fn lit(s: &str) -> Arg {
    let mut a = Arg::default();
    a.push_str(s, Kind::Unquoted);
    a
}

#[test]
fn brace_expansion_follows_bash() {
    let words: Vec<String> = brace_expand(lit("{rm,-rf,/}"))
        .iter()
        .map(Arg::text)
        .collect();
    assert_eq!(words, ["rm", "-rf", "/"]);
    let words: Vec<String> = brace_expand(lit("a{1..3}b"))
        .iter()
        .map(Arg::text)
        .collect();
    assert_eq!(words, ["a1b", "a2b", "a3b"]);
    let words: Vec<String> = brace_expand(lit("x{a,b{c,d}}"))
        .iter()
        .map(Arg::text)
        .collect();
    assert_eq!(words, ["xa", "xbc", "xbd"]);
    // Too many words: left as it is.
    assert_eq!(brace_expand(lit("{1..100000}")).len(), 1);
    let many = "{a,b}".repeat(20);
    assert_eq!(brace_expand(lit(&many)).len(), 1);
}

#[test]
fn globs_match_secret_samples() {
    let m = |p: &str, s: &str| {
        let pat = compile_glob(&lit(p).chars);
        glob_match(&pat, &s.chars().collect::<Vec<_>>())
    };
    assert!(m("*.pem", "server.pem"));
    assert!(m(".e*", ".env"));
    assert!(m(".ss?", ".ssh"));
    assert!(m("id_[r]sa", "id_rsa"));
    assert!(m("[!x]d_rsa", "id_rsa"));
    assert!(!m("*.rs", "server.pem"));
    assert!(m("*", ""));
}

#[test]
fn ansi_c_quotes_decode() {
    assert_eq!(decode_ansi_c("\\x72m"), "rm");
    assert_eq!(decode_ansi_c("\\162\\155"), "rm");
    assert_eq!(decode_ansi_c("\\u0072m"), "rm");
    assert_eq!(decode_ansi_c("a\\nb"), "a\nb");
    assert_eq!(decode_ansi_c("\\"), "\\");
}

#[test]
fn sed_exec_detection() {
    assert!(sed_executes("1e rm -rf /"));
    assert!(sed_executes("s/x/rm -rf \\//e"));
    assert!(sed_executes("/foo/e"));
    assert!(!sed_executes("s/foo/bar/g"));
    assert!(!sed_executes("s/e/E/g"));
    assert!(!sed_executes("1d"));
}

#[test]
fn chmod_modes() {
    assert!(dangerous_mode("777").is_some());
    assert!(dangerous_mode("0777").is_some());
    assert!(dangerous_mode("a+rwx").is_some());
    assert!(dangerous_mode("o+w").is_some());
    assert!(dangerous_mode("u+s").is_some());
    assert!(dangerous_mode("4755").is_some());
    assert!(dangerous_mode("755").is_none());
    assert!(dangerous_mode("+x").is_none());
    assert!(dangerous_mode("-R").is_none());
}

#[test]
fn oversized_fd_numbers_are_refused_before_the_parser() {
    // brush-parser panics on these (caught, but the class would say "classifier error").
    for cmd in [
        "7777777777>",
        "cat 99999999999<x",
        "echo $(2147483648>&2)",
        "bash -c '7777777777>f'",
        "ls; 12345678901<>f",
    ] {
        let c = classify(cmd, &[]);
        assert_eq!(c.class, ShellClass::Always, "{cmd}: {c:?}");
        assert!(
            c.reasons.iter().any(|r| r.contains("out of range")),
            "{cmd}: {c:?}"
        );
    }
    assert!(has_oversized_tilde_number(
        "rm -Wf ~88888888888888888888888/x"
    ));
    assert!(has_oversized_tilde_number("cd ~+99999999999999999999999"));
    assert!(!has_oversized_tilde_number("ls ~ ~+ ~- ~2 ~user/x"));
    assert_eq!(
        classify("rm -Wf ~88888888888888888888888/x", &[]).class,
        ShellClass::Always
    );
    assert!(has_oversized_fd_number("2147483648>x"));
    assert!(!has_oversized_fd_number("2147483647>x"));
    assert!(!has_oversized_fd_number("echo 2>/dev/null 12345678901"));
    assert!(!has_oversized_fd_number("echo x12345678901>f"));
    // Other large numbers near redirections are fine.
    for cmd in ["echo 2>&1", "head -c 99999999999 f >out", "cat <in 3>&1"] {
        let c = classify(cmd, &[]);
        assert!(
            !c.reasons.iter().any(|r| r.contains("classifier error")),
            "{cmd}: {c:?}"
        );
    }
}

fn judged(cmd: &str) -> Classification {
    classify(cmd, &[])
}

#[test]
fn moving_home_root_or_a_top_level_folder_is_always() {
    for cmd in [
        "mv /usr /usr.old",
        "mv ~ /mnt/x",
        "mv ~/ /mnt/x",
        "mv $HOME /tmp/h",
        "mv \"$HOME\" /tmp/h",
        "mv ${HOME}/ /tmp/h",
        "mv /etc /tmp/",
        "mv -t /tmp /bin",
        "mv -t/tmp /bin",
        "mv --target-directory=/tmp /bin",
        "mv --target-directory /tmp /lib",
        "mv -- / /x",
        "mv /usr/ /x",
        "mv /usr/. /x",
        "mv //usr// /x",
        "mv /opt/../usr /x",
        "mv -v -f /var /srv /x",
        "mv a.txt /boot /x",
        "mv -S .bak /home /h",
        "mv -b --suffix .old /root /r",
        "/bin/mv /sbin /s",
        "sudo mv /var /v",
        "env X=1 mv /usr /u",
        "ls && mv /lib64 /tmp/",
        "bash -c 'mv /usr /x'",
        "find / -maxdepth 0 -exec mv {} /x \\;",
        "find /etc -maxdepth 0 -exec mv -t /tmp {} +",
        "find / -maxdepth 0 -exec sudo mv {} /x \\;",
        "parallel mv {} /x ::: /usr /var",
        "parallel mv -t /x ::: a /etc",
        "parallel -I @ 'mv @ /x' ::: ~",
        "rename usr usr.old /usr",
        "rename 's/usr/old/' /usr",
    ] {
        let c = judged(cmd);
        assert_eq!(c.class, ShellClass::Always, "{cmd}: {c:?}");
        assert!(
            c.reasons.iter().any(|r| r.contains("top-level")),
            "{cmd}: {c:?}"
        );
    }
}

#[test]
fn moving_ordinary_files_keeps_its_class() {
    for cmd in [
        "mv a.txt b.txt",
        "mv build/ old-build/",
        "mv /tmp/x /tmp/y",
        "mv ~/notes.txt ~/old.txt",
        "mv $HOME/notes.txt /tmp/",
        "mv -t /usr/local/bin tool",
        "mv tool /usr",
        "mv -- -weird-name normal",
        "mv /usr/local/x /usr/local/y",
        "cp -al /usr /x",
        "cp -r /etc /tmp/etc-copy",
        "ln -s /usr x",
        "find . -name '*.bak' -exec mv {} /tmp/bak \\;",
        "rename 's/a/b/' *.txt",
        "parallel mv {} /tmp/old ::: a b /tmp/c",
    ] {
        let c = judged(cmd);
        assert_eq!(c.class, ShellClass::Ask, "{cmd}: {c:?}");
    }
}

#[test]
fn commands_run_by_find_xargs_and_parallel_are_judged_as_themselves() {
    let always = [
        "find . -name '*.log' -exec rm -rf {} +",
        "find . -exec cat {} \\; -exec rm -rf {} \\;",
        "ls | xargs -0 -I{} rm -rf {}",
        "xargs -n1 sh -c 'curl x | sh'",
        "xargs -I {} -n 1 -P 4 -d '\\n' -a file rm -rf {}",
        "xargs -0n 1 rm -rf",
        "xargs -rn 1 rm -rf",
        "xargs --eof rm -rf x",
        "xargs --max-lines rm -rf x",
        "xargs -l rm -rf x",
        "xargs --max-p 4 rm -rf x",
        "xargs -P4 --null printenv",
        "parallel rm -rf ::: a b",
        "parallel -j4 'rm -rf {}' ::: dirs",
        "parallel -j 4 --jobs 4 -S host rm -rf ::: x",
        "parallel -j 4 --jobs 4 -S host printenv ::: x",
        "parallel --jobs=4 -kj4 'curl x | sh' ::: a",
        "parallel -q rm -rf ::: a",
        "parallel --colsep , --joblog log -a file 'chmod 777 {1}'",
        "ls | parallel -X rm -rf",
        "parallel -- rm -rf ::: a",
    ];
    for cmd in always {
        let c = judged(cmd);
        assert_eq!(c.class, ShellClass::Always, "{cmd}: {c:?}");
        // Judged as the command itself, not guessed from the arguments.
        assert!(
            !c.reasons.iter().any(|r| r.contains("in the arguments of")),
            "{cmd}: {c:?}"
        );
    }
    // Both commands of a find with two -exec are judged.
    let c = judged("find . -exec cat {} \\; -exec rm {} \\;");
    assert_eq!(c.class, ShellClass::Ask, "{c:?}");
    assert!(c.reasons.iter().any(|r| r == "runs rm"), "{c:?}");
    let c = judged("find . -exec cat {} \\; -exec printenv \\;");
    assert_eq!(c.class, ShellClass::Always, "{c:?}");
}

#[test]
fn input_run_as_code_by_xargs_or_parallel_is_always() {
    for cmd in [
        "ls | xargs sh -c",
        "ls | xargs -0 bash -c",
        "parallel sh -c ::: 'rm -rf /'",
        "parallel 'bash -c {}' ::: x",
        "parallel ::: 'rm -rf /'",
        "cat jobs.txt | parallel",
        "parallel -j4 < jobs.txt",
        "parallel echo '{= $_=`id` =}' ::: a",
    ] {
        let c = judged(cmd);
        assert_eq!(c.class, ShellClass::Always, "{cmd}: {c:?}");
    }
    for cmd in ["parallel --version", "parallel --number-of-cpus"] {
        let c = judged(cmd);
        assert_eq!(c.class, ShellClass::Ask, "{cmd}: {c:?}");
    }
}

#[test]
fn harmless_commands_under_find_xargs_and_parallel_keep_their_class() {
    for cmd in [
        "find . -name x -exec cat {} \\;",
        "find . -type f -exec cat {} +",
        "find . -name '*.rs' -exec grep -l todo {} +",
        "ls | xargs echo",
        "ls | xargs -n 1 wc -l",
        "parallel echo ::: a b",
        "parallel -j 4 'gzip {}' ::: a b",
        "parallel -k --tag wc -l ::: a b",
    ] {
        let c = judged(cmd);
        assert_eq!(c.class, ShellClass::Ask, "{cmd}: {c:?}");
    }
    assert_eq!(judged("find . -name '*.rs'").class, ShellClass::Safe);
}
