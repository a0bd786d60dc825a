//! System administration: processes, services, the firewall, user accounts, runlevels, `tar`
//! options that run commands. Mostly ask once; the destructive forms always ask.

use super::super::Walker;
use crate::words::{short_cluster, shorten, texts, Arg};
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
            "kill" => {
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
            "systemctl" => {
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
            "iptables" | "ip6tables" | "iptables-legacy" | "iptables-nft" => {
                if args.iter().any(|a| {
                    let t = a.text();
                    matches!(t.as_str(), "--flush" | "--delete-chain")
                        || short_cluster(&t)
                            .is_some_and(|c| c.starts_with('F') || c.starts_with('X'))
                }) {
                    self.note(ShellClass::Always, format!("{name} -F"));
                } else {
                    self.note(ShellClass::Ask, format!("runs {name}"));
                }
            }
            "nft" => {
                if args.iter().any(|a| a.text() == "flush") {
                    self.note(ShellClass::Always, "nft flush");
                } else {
                    self.note(ShellClass::Ask, "runs nft");
                }
            }
            "userdel" | "deluser" | "passwd" | "chpasswd" | "usermod" | "groupdel" | "delgroup" => {
                self.note(
                    ShellClass::Always,
                    format!("changes user accounts ({name})"),
                );
            }
            "ps" => {
                if args.iter().any(|a| {
                    let t = a.text();
                    !t.starts_with('-') && t.contains('e')
                }) {
                    self.note(ShellClass::Always, "ps shows process environments");
                } else {
                    self.note(ShellClass::Ask, "runs ps");
                }
            }
            "tar" | "bsdtar" | "gtar" => {
                if args.iter().any(|a| {
                    let t = a.text();
                    t.contains("--to-command")
                        || t.contains("--checkpoint-action")
                        || t.contains("--use-compress-program")
                        || t.contains("--rsh-command")
                        || t.contains("--info-script")
                        || t.contains("--new-volume-script")
                        || t == "-I"
                }) {
                    self.note(ShellClass::Always, "tar runs a command");
                } else {
                    self.note(ShellClass::Ask, format!("runs {name}"));
                }
            }
            // Not reached (the dispatch sends only the names above).
            _ => self.note(ShellClass::Ask, format!("runs {}", shorten(name))),
        }
    }
}
