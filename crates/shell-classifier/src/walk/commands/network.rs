//! `ssh`: the remote command is shell code and is walked as such.

use super::super::{Stdin, Walker};
use crate::words::{long_option_is, short_cluster, texts, Arg};
use crate::ShellClass;

impl<'a> Walker<'a> {
    /// `rsync`: `-e`/`--rsh` and `--rsync-path` name programs it runs (any unique prefix, `-e`
    /// anywhere in a short cluster).
    pub(crate) fn rsync_command(&mut self, args: &[Arg]) {
        let runs = args.iter().any(|a| {
            let t = a.text();
            a.is_dynamic()
                || long_option_is(&t, "--rsh")
                || long_option_is(&t, "--rsync-path")
                || short_cluster(&t).is_some_and(|c| c.contains('e'))
        });
        if runs {
            self.note(
                ShellClass::Always,
                "rsync runs a program (-e, --rsync-path)",
            );
        } else {
            self.note(ShellClass::Ask, "runs rsync");
        }
    }

    pub(crate) fn ssh_command(&mut self, argv: &[Arg], depth: usize) {
        self.note(ShellClass::Ask, "runs ssh");
        let texts = texts(argv);
        let mut i = 1;
        while let Some(t) = texts.get(i) {
            if t.to_lowercase().contains("proxycommand")
                || t.to_lowercase().contains("localcommand")
            {
                self.note(ShellClass::Always, "ssh option that runs a local command");
            }
            if t == "--" {
                i += 1;
                break;
            }
            if let Some(cluster) = short_cluster(t) {
                let last = cluster.chars().last().unwrap_or(' ');
                if "BbcDEeFIiJLlmOopQRSWw".contains(last) {
                    if let Some(v) = texts.get(i + 1) {
                        if v.to_lowercase().contains("proxycommand")
                            || v.to_lowercase().contains("localcommand")
                        {
                            self.note(ShellClass::Always, "ssh option that runs a local command");
                        }
                    }
                    i += 2;
                } else {
                    i += 1;
                }
                continue;
            }
            break;
        }
        // argv[i] is the host; the rest is a remote command line.
        let remote: Vec<&Arg> = argv.iter().skip(i + 1).collect();
        if remote.is_empty() {
            return;
        }
        if remote.iter().any(|a| a.is_dynamic()) {
            self.note(ShellClass::Always, "remote command is not literal");
        }
        let code: Vec<String> = remote.iter().map(|a| a.text()).collect();
        let mut inner = self.sub_walker();
        inner.walk_script(&code.join(" "), depth + 1, Stdin::Inherited);
        self.absorb(inner, |_| true);
    }
}
