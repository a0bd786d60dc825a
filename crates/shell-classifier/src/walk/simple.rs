//! Simple commands: their words gathered in bash's order and brace-expanded, their prefix
//! assignments (and the variables that make programs run other code), then the command handed to
//! the rules.

use brush_parser::ast;

use super::{Ctx, Input, Stdin, Walker, BENIGN_VARIABLES};
use crate::words::{brace_expand, is_identifier, Arg, Kind};
use crate::ShellClass;

/// Variables that make ordinary programs run code of the caller's choice.
pub(crate) const CODE_VARIABLES: &[&str] = &[
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "PS4",
    "SHELLOPTS",
    "BASHOPTS",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_EXTERNAL_DIFF",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_ASKPASS",
    "GIT_EXEC_PATH",
    "GIT_CONFIG_PARAMETERS",
    "SSH_ASKPASS",
    "PAGER",
    "MANPAGER",
    "EDITOR",
    "VISUAL",
    "LESSOPEN",
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "NODE_OPTIONS",
    "PERL5OPT",
    "PERL5LIB",
    "RUBYOPT",
    "RIPGREP_CONFIG_PATH",
    "GIT_DIR",
    "GIT_WORK_TREE",
];

/// Variables a command may put into its programs' environment and stay safe: locale, time
/// zone, terminal size and colours, output formats. Every other name asks (deny by default).
pub(crate) const EXPORT_HARMLESS: &[&str] = &[
    "LANG",
    "LANGUAGE",
    "TZ",
    "COLUMNS",
    "LINES",
    "TERM",
    "NO_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "FORCE_COLOR",
    "POSIXLY_CORRECT",
    "TIME_STYLE",
    "QUOTING_STYLE",
    "BLOCK_SIZE",
    "BLOCKSIZE",
    "DF_BLOCK_SIZE",
    "DU_BLOCK_SIZE",
    "LS_BLOCK_SIZE",
    "LS_COLORS",
    "GREP_COLOR",
    "GREP_COLORS",
    "TABSIZE",
];

impl<'a> Walker<'a> {
    pub(crate) fn walk_simple(&mut self, cmd: &ast::SimpleCommand, ctx: Ctx, depth: usize) {
        let plain = Ctx::nested(ctx.stdin);
        let mut input = match ctx.stdin {
            Stdin::Inherited => Input::Inherited,
            Stdin::Piped => Input::Piped,
        };
        let mut words: Vec<Arg> = Vec::new();
        let prefix = cmd
            .prefix
            .iter()
            .flat_map(|p| p.0.iter())
            .map(|item| (true, item));
        let suffix = cmd
            .suffix
            .iter()
            .flat_map(|s| s.0.iter())
            .map(|item| (false, item));
        let mut name_done = false;
        for (in_prefix, item) in prefix.chain(suffix) {
            if !in_prefix && !name_done {
                name_done = true;
                if let Some(name) = &cmd.word_or_name {
                    words.push(self.ast_word(name, plain, depth));
                }
            }
            match item {
                ast::CommandPrefixOrSuffixItem::IoRedirect(r) => {
                    self.walk_redirect(r, ctx, depth, &mut input);
                }
                ast::CommandPrefixOrSuffixItem::Word(w) => {
                    words.push(self.ast_word(w, plain, depth));
                }
                ast::CommandPrefixOrSuffixItem::AssignmentWord(a, w) => {
                    self.verify_word(w);
                    if in_prefix {
                        self.assignment(a, plain, depth, cmd.word_or_name.is_some());
                    } else {
                        // An argument of a declaration builtin (`export X=…`).
                        words.push(self.ast_word(w, plain, depth));
                    }
                }
                ast::CommandPrefixOrSuffixItem::ProcessSubstitution(kind, sub) => {
                    let inner_stdin = match kind {
                        ast::ProcessSubstitutionKind::Write => Stdin::Piped,
                        ast::ProcessSubstitutionKind::Read => ctx.stdin,
                    };
                    self.walk_list(&sub.list, Ctx::nested(inner_stdin), depth + 1);
                    let mut arg = Arg::default();
                    arg.push_str("<(…)", Kind::Dynamic);
                    arg.procsub = true;
                    words.push(arg);
                }
            }
        }
        if !name_done {
            if let Some(name) = &cmd.word_or_name {
                words.push(self.ast_word(name, plain, depth));
            }
        }
        let mut argv = Vec::new();
        for (i, w) in words.into_iter().enumerate() {
            let braces = w
                .chars
                .iter()
                .any(|&(c, k)| c == '{' && k == Kind::Unquoted)
                && w.chars
                    .iter()
                    .any(|&(c, k)| c == '}' && k == Kind::Unquoted);
            let expanded = brace_expand(w);
            if i == 0 && (expanded.len() > 1 || braces) {
                self.note(ShellClass::Always, "command name uses brace expansion");
            }
            argv.extend(expanded);
        }
        self.command(&argv, &input, ctx, depth);
    }

    /// `exported`: the assignment prefixes a command, which gets it in its environment.
    pub(crate) fn assignment(
        &mut self,
        a: &ast::Assignment,
        ctx: Ctx,
        depth: usize,
        exported: bool,
    ) {
        let name = match &a.name {
            ast::AssignmentName::VariableName(n) => n.clone(),
            ast::AssignmentName::ArrayElementName(n, index) => {
                self.walk_arithmetic(index, ctx, depth + 1);
                n.clone()
            }
        };
        if exported {
            self.exported_name(&name);
        } else {
            self.assigned_name(&name);
        }
        let values: Vec<&ast::Word> = match &a.value {
            ast::AssignmentValue::Scalar(w) => vec![w],
            ast::AssignmentValue::Array(items) => items
                .iter()
                .flat_map(|(k, v)| k.iter().chain(std::iter::once(v)))
                .collect(),
        };
        for w in values {
            let arg = self.ast_word(w, ctx, depth);
            self.check_arg_common(&arg);
        }
    }

    /// A variable put into the environment of the programs a command runs (`NAME=… cmd`,
    /// `export`, `env NAME=…`): besides [`Self::assigned_name`], only names known to steer no
    /// program to other code or configuration ([`EXPORT_HARMLESS`]) keep a command safe. Any
    /// other (`GIT_COMMON_DIR`, `XDG_CONFIG_HOME`, `GCONV_PATH`, one a later program reads)
    /// asks.
    pub(crate) fn exported_name(&mut self, name: &str) {
        self.assigned_name(name);
        let harmless = EXPORT_HARMLESS.contains(&name)
            || (name.starts_with("LC_") && is_identifier(name))
            || BENIGN_VARIABLES.contains(&name);
        if !harmless {
            self.note(
                ShellClass::Ask,
                format!("passes {name} to the programs it runs"),
            );
        }
    }

    pub(crate) fn assigned_name(&mut self, name: &str) {
        self.check_text(name);
        if CODE_VARIABLES.contains(&name)
            || name.starts_with("BASH_FUNC_")
            || name.starts_with("GIT_CONFIG")
        {
            self.note(
                ShellClass::Always,
                format!("sets {name}, which makes programs run other code"),
            );
        } else if matches!(name, "PATH" | "IFS" | "HOME" | "CDPATH" | "GLOBIGNORE") {
            self.note(ShellClass::Ask, format!("changes {name}"));
        }
        self.assigned.insert(name.to_owned());
    }
}
