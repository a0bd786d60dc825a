//! Redirections: what a command reads as standard input (a file, a here-document, a pipe) and
//! what it writes to (judged by [`crate::paths::dangerous_write_target`] and friends).

use brush_parser::ast;
use brush_parser::word;
use brush_parser::ParserOptions;

use super::{Ctx, Input, Stdin, Walker, BENIGN_VARIABLES};
use crate::paths::{dangerous_write_target, normalize_path, HARMLESS_DEVICES};
use crate::words::{shorten, Arg};
use crate::ShellClass;

impl<'a> Walker<'a> {
    pub(crate) fn walk_redirect(
        &mut self,
        r: &ast::IoRedirect,
        ctx: Ctx,
        depth: usize,
        input: &mut Input,
    ) {
        let plain = Ctx::nested(ctx.stdin);
        let is_stdin = |fd: &Option<ast::IoFd>| fd.is_none_or(|fd| fd == 0);
        match r {
            ast::IoRedirect::File(fd, kind, target) => match target {
                ast::IoFileRedirectTarget::Filename(w) => {
                    let arg = self.ast_word(w, plain, depth);
                    self.check_arg_common(&arg);
                    match kind {
                        ast::IoFileRedirectKind::Read => {
                            // bash opens a network connection for these names, in any direction.
                            let t = arg.text();
                            if t.starts_with("/dev/tcp/") || t.starts_with("/dev/udp/") {
                                self.note(ShellClass::Ask, "opens a network connection");
                            }
                            if is_stdin(fd) {
                                *input = Input::File(arg);
                            }
                        }
                        ast::IoFileRedirectKind::DuplicateInput => {}
                        _ => self.write_target(&arg),
                    }
                }
                ast::IoFileRedirectTarget::Fd(_) => {}
                ast::IoFileRedirectTarget::Duplicate(w) => {
                    let arg = self.ast_word(w, plain, depth);
                    let text = arg.text();
                    let is_fd = arg.is_static()
                        && (text == "-"
                            || text
                                .trim_end_matches('-')
                                .chars()
                                .all(|c| c.is_ascii_digit()));
                    if matches!(kind, ast::IoFileRedirectKind::DuplicateOutput) && !is_fd {
                        self.check_arg_common(&arg);
                        self.write_target(&arg);
                    }
                }
                ast::IoFileRedirectTarget::ProcessSubstitution(pkind, sub) => {
                    let inner_stdin = match pkind {
                        ast::ProcessSubstitutionKind::Write => Stdin::Piped,
                        ast::ProcessSubstitutionKind::Read => ctx.stdin,
                    };
                    self.walk_list(&sub.list, Ctx::nested(inner_stdin), depth + 1);
                    if matches!(kind, ast::IoFileRedirectKind::Read) && is_stdin(fd) {
                        *input = Input::Piped;
                    }
                }
            },
            ast::IoRedirect::HereDocument(fd, doc) => {
                self.verify_here_document(doc);
                let mut is_static = true;
                if doc.requires_expansion {
                    match word::parse_heredoc(&doc.doc.value, &ParserOptions::default()) {
                        Ok(pieces) => {
                            let mut arg = Arg::default();
                            self.pieces(&pieces, true, &mut arg, plain, depth + 1);
                            is_static = arg.is_static();
                        }
                        Err(_) => {
                            self.note(ShellClass::Always, "cannot parse (here-document)");
                            is_static = false;
                        }
                    }
                }
                if is_stdin(fd) {
                    *input = Input::Text {
                        text: doc.doc.value.clone(),
                        is_static,
                    };
                }
            }
            ast::IoRedirect::HereString(fd, w) => {
                let arg = self.ast_word(w, plain, depth);
                self.check_text(&arg.text());
                if is_stdin(fd) {
                    *input = Input::Text {
                        text: arg.text(),
                        is_static: arg.is_static(),
                    };
                }
            }
            ast::IoRedirect::OutputAndError(w, _) => {
                let arg = self.ast_word(w, plain, depth);
                self.check_arg_common(&arg);
                self.write_target(&arg);
            }
        }
    }

    /// Writing to a file given by `arg` (a redirection, `tee`, …).
    pub(crate) fn write_target(&mut self, arg: &Arg) {
        let text = arg.text();
        if arg.procsub {
            return;
        }
        if arg.has_glob() {
            self.note(
                ShellClass::Always,
                format!("writes to a glob pattern ({})", shorten(&text)),
            );
            return;
        }
        if let Some(reason) = dangerous_write_target(&text) {
            self.note(ShellClass::Always, reason);
            return;
        }
        if HARMLESS_DEVICES.contains(&normalize_path(&text).as_str()) {
            return;
        }
        if arg.starts_dynamic() {
            let benign_start = arg.vars.first().is_some_and(|v| {
                BENIGN_VARIABLES.contains(&v.as_str()) && text.starts_with(&format!("${v}"))
            });
            if !benign_start {
                self.note(
                    ShellClass::Always,
                    format!("writes to a non-literal path ({})", shorten(&text)),
                );
                return;
            }
            if let Some(v) = arg.vars.first() {
                self.deferred.push((
                    v.clone(),
                    ShellClass::Always,
                    format!("writes to a path built from a reassigned ${v}"),
                ));
            }
        }
        self.note(
            ShellClass::Ask,
            format!("writes to a file ({})", shorten(&text)),
        );
    }

    /// Checks every argument gets: the daemon's secrets and secret-looking paths.
    pub(crate) fn check_arg_common(&mut self, arg: &Arg) {
        self.check_text(&arg.text());
        self.check_secret_path(arg);
    }
}
