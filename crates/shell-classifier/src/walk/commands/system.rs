//! System administration: processes, services, the firewall, user accounts, runlevels, `tar`
//! options that run commands. Mostly ask once; the destructive forms always ask.

use super::super::Walker;
use crate::words::{long_option_is, short_cluster, shorten, texts, Arg};

/// `tar` options that run a program (any unique prefix counts).
const TAR_RUNS: &[&str] = &[
    "--to-command",
    "--checkpoint-action",
    "--use-compress-program",
    "--rsh-command",
    "--info-script",
    "--new-volume-script",
    "--rmt-command",
    "--index-file",
];
use crate::ShellClass;

impl Walker<'_> {
    /// The system administration commands (the dispatch sends exactly these names here).
    pub(crate) fn system_command(&mut self, name: &str, args: &[Arg]) {
        match name {
            "crontab" => {
                if args
                    .iter()
                    .any(|a| short_cluster(&a.text()).is_some_and(|c| c.contains('r')))
                {
                    self.note(ShellClass::Always, "crontab -r");
                } else {
                    self.note(ShellClass::Ask, "runs crontab");
                }
            }
            "kill" => self.kill_command(args),
            "shutdown" | "reboot" | "halt" | "poweroff" => {
                self.note(ShellClass::Always, name);
            }
            "init" | "telinit" => {
                if args
                    .iter()
                    .any(|a| matches!(a.text().as_str(), "0" | "6" | "1" | "s" | "S"))
                {
                    self.note(ShellClass::Always, format!("{name} changes the runlevel"));
                } else {
                    self.note(ShellClass::Ask, format!("runs {name}"));
                }
            }
            "systemctl" => self.systemctl_command(args),
            "iptables" | "ip6tables" | "iptables-legacy" | "iptables-nft" | "nft" => {
                self.firewall_command(name, args)
            }
            "userdel" | "deluser" | "passwd" | "chpasswd" | "usermod" | "groupdel" | "delgroup" => {
                self.note(
                    ShellClass::Always,
                    format!("changes user accounts ({name})"),
                );
            }
            "ps" => self.ps_command(args),
            "tar" | "bsdtar" | "gtar" => self.tar_command(name, args),
            // Not reached (the dispatch sends only the names above).
            _ => self.note(ShellClass::Ask, format!("runs {}", shorten(name))),
        }
    }

    /// `kill`: pid -1 (every process) always asks.
    fn kill_command(&mut self, args: &[Arg]) {
        let texts = texts(args);
        // The first argument is a signal when it starts with a dash: `kill -9 -1`,
        // `kill -s KILL -1`, `kill -1 -1`; pid -1 means every process.
        let mut i = 0;
        if matches!(texts.first().map(String::as_str), Some("-s" | "-n")) {
            i = 2;
        } else if texts
            .first()
            .is_some_and(|t| t.starts_with('-') && t != "--")
        {
            i = 1;
        }
        if texts.get(i).is_some_and(|t| t == "--") {
            i += 1;
        }
        if texts.iter().skip(i).any(|t| t == "-1") {
            self.note(ShellClass::Always, "kills every process (kill -1)");
        } else {
            self.note(ShellClass::Ask, "runs kill");
        }
    }

    /// `systemctl`: stopping, masking or powering off always asks.
    fn systemctl_command(&mut self, args: &[Arg]) {
        let sub = args
            .iter()
            .map(Arg::text)
            .find(|t| !t.starts_with('-'))
            .unwrap_or_default();
        if matches!(
            sub.as_str(),
            "stop"
                | "disable"
                | "mask"
                | "kill"
                | "poweroff"
                | "reboot"
                | "halt"
                | "isolate"
                | "emergency"
                | "rescue"
                | "suspend"
                | "hibernate"
                | "kexec"
                | "soft-reboot"
        ) {
            self.note(ShellClass::Always, format!("systemctl {sub}"));
        } else {
            self.note(ShellClass::Ask, "runs systemctl");
        }
    }

    /// The firewall: flushing the rules (`iptables -F`, `-X`, `nft flush`) always asks.
    fn firewall_command(&mut self, name: &str, args: &[Arg]) {
        if name == "nft" {
            if args.iter().any(|a| a.text() == "flush") {
                self.note(ShellClass::Always, "nft flush");
            } else {
                self.note(ShellClass::Ask, "runs nft");
            }
            return;
        }
        if args.iter().any(|a| {
            let t = a.text();
            long_option_is(&t, "--flush")
                || long_option_is(&t, "--delete-chain")
                || short_cluster(&t).is_some_and(|c| c.starts_with('F') || c.starts_with('X'))
        }) {
            self.note(ShellClass::Always, format!("{name} -F"));
        } else {
            self.note(ShellClass::Ask, format!("runs {name}"));
        }
    }

    /// `ps`: BSD-style `e` shows the environments of processes.
    fn ps_command(&mut self, args: &[Arg]) {
        if args.iter().any(|a| {
            let t = a.text();
            !t.starts_with('-') && t.contains('e')
        }) {
            self.note(ShellClass::Always, "ps shows process environments");
        } else {
            self.note(ShellClass::Ask, "runs ps");
        }
    }

    /// `tar`: options that run a program always ask.
    fn tar_command(&mut self, name: &str, args: &[Arg]) {
        let texts = texts(args);
        // The first word may be an old-style option cluster without a dash (`tar xIf`).
        let old_style = texts
            .first()
            .is_some_and(|t| !t.starts_with('-') && t.contains(['I', 'F']));
        if old_style
            || texts.iter().any(|t| {
                TAR_RUNS.iter().any(|o| long_option_is(t, o))
                    || short_cluster(t).is_some_and(|c| {
                        // -I PROG and -F SCRIPT, unless the letter is another's value.
                        let upto = c.find(['f', 'C', 'T', 'X', 'g', 'K', 'N', 'L', 'b', 'H', 'V']);
                        let head = upto.map_or(c, |k| &c[..=k]);
                        head.contains(['I', 'F'])
                    })
            })
        {
            self.note(ShellClass::Always, "tar runs a command");
        } else {
            self.note(ShellClass::Ask, format!("runs {name}"));
        }
    }
}
