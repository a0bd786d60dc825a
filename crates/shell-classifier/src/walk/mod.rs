//! The walk over the syntax tree: every simple command in lists, pipelines, compound commands,
//! function bodies, substitutions, redirections and nested scripts, with the walker's state
//! (notes, work budget, depth, functions and variables seen) and how the notes become one
//! [`Classification`] ("worst wins"). Words are expanded in `expand`, redirections judged in
//! `redirects`, simple commands assembled in `simple` and judged by the rules in `commands`.

pub(crate) mod commands;
mod expand;
mod redirects;
mod simple;

use std::collections::HashSet;

use brush_parser::ast;
use brush_parser::word::{self};
use brush_parser::ParserOptions;

use crate::parse::{self, MAX_DEPTH, MAX_STEPS};
use crate::paths::secret_path;
use crate::secrets::{mentions_ethan_dir, DAEMON_MARKERS};
use crate::words::{shorten, Arg, Kind};
use crate::{Classification, ShellClass};

/// Classifies one command line on the current thread (see [`crate::parse::guarded`]).
pub(crate) fn classify_here(command: &str, secrets: &[String]) -> Classification {
    let mut walker = Walker {
        secrets,
        notes: Vec::new(),
        steps: 0,
        functions: Vec::new(),
        assigned: HashSet::new(),
        deferred: Vec::new(),
        commands_seen: 0,
        guessing: false,
        source: Vec::new(),
    };
    walker.walk_script(command, 0, Stdin::Inherited);
    if walker.commands_seen == 0 && walker.notes.is_empty() {
        walker.note(ShellClass::Always, "empty command");
    }
    walker.finish()
}

/// Where a command's standard input comes from, as far as it matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Stdin {
    /// The tool's own standard input.
    #[default]
    Inherited,
    /// A pipe or other data produced by the command line itself.
    Piped,
}

/// Standard input of one simple command after its redirections.
#[derive(Debug, Clone)]
pub(crate) enum Input {
    Inherited,
    Piped,
    /// A here-document or here-string; `is_static` is false when it has expansions.
    Text {
        text: String,
        is_static: bool,
    },
    /// `< file`.
    File(Arg),
}

impl Input {
    pub(crate) fn as_stdin(&self) -> Stdin {
        match self {
            Input::Inherited => Stdin::Inherited,
            _ => Stdin::Piped,
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ctx {
    pub(crate) stdin: Stdin,
    /// Inside a pipeline of two or more commands.
    pub(crate) pipeline: bool,
    /// Run in the background (`&`).
    pub(crate) background: bool,
    /// Gets extra arguments from its input (`xargs`).
    pub(crate) args_from_input: bool,
}

impl Ctx {
    pub(crate) fn nested(stdin: Stdin) -> Ctx {
        Ctx {
            stdin,
            ..Ctx::default()
        }
    }
}

pub(crate) struct Walker<'a> {
    pub(crate) secrets: &'a [String],
    pub(crate) notes: Vec<(ShellClass, String)>,
    pub(crate) steps: usize,
    /// Functions whose bodies are being walked.
    pub(crate) functions: Vec<String>,
    /// Every variable name the command sets in any way we can see.
    pub(crate) assigned: HashSet<String>,
    /// Checks on benign variables, decided at the end: (variable, class, reason).
    pub(crate) deferred: Vec<(String, ShellClass, String)>,
    /// Commands of any kind seen.
    pub(crate) commands_seen: usize,
    /// Inside a guess at commands embedded in an unknown command's arguments (no nested guesses).
    pub(crate) guessing: bool,
    /// The characters of the script being walked (source spans index into it).
    pub(crate) source: Vec<char>,
}

/// Environment variables that are harmless to use in arguments of read-only commands, as long as
/// the command does not set them itself.
pub(crate) const BENIGN_VARIABLES: &[&str] =
    &["HOME", "PWD", "OLDPWD", "USER", "LOGNAME", "TMPDIR"];

impl<'a> Walker<'a> {
    pub(crate) fn note(&mut self, class: ShellClass, reason: impl Into<String>) {
        if class == ShellClass::Safe {
            return;
        }
        let reason = reason.into();
        if !self.notes.iter().any(|(c, r)| *c == class && *r == reason) {
            self.notes.push((class, reason));
        }
    }

    pub(crate) fn finish(mut self) -> Classification {
        for (var, class, reason) in std::mem::take(&mut self.deferred) {
            if self.assigned.contains(&var) {
                self.note(class, reason);
            }
        }
        let class = self
            .notes
            .iter()
            .map(|(c, _)| *c)
            .max()
            .unwrap_or(ShellClass::Safe);
        let reasons = self
            .notes
            .into_iter()
            .filter(|(c, _)| *c == class)
            .map(|(_, r)| r)
            .collect();
        Classification { class, reasons }
    }

    /// Counts one step of work; false once the budget is spent.
    pub(crate) fn tick(&mut self) -> bool {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            self.note(ShellClass::Always, "too complex to analyse");
            return false;
        }
        true
    }

    pub(crate) fn deep(&mut self, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            self.note(ShellClass::Always, "nested too deeply");
            return true;
        }
        false
    }

    /// References to configured secrets or to the daemon's own files and variables.
    pub(crate) fn check_text(&mut self, text: &str) {
        if self
            .secrets
            .iter()
            .any(|s| !s.is_empty() && text.contains(s.as_str()))
        {
            self.note(ShellClass::Always, "contains a configured secret");
        }
        let lower = text.to_lowercase();
        if DAEMON_MARKERS.iter().any(|m| lower.contains(m)) || mentions_ethan_dir(&lower) {
            self.note(
                ShellClass::Always,
                "references the daemon's own files or secrets",
            );
        }
    }

    pub(crate) fn check_secret_path(&mut self, arg: &Arg) {
        if let Some(p) = secret_path(arg) {
            self.note(
                ShellClass::Always,
                format!("touches a secret-looking path ({})", shorten(&p)),
            );
        }
    }

    /// Parses and walks a piece of shell code.
    pub(crate) fn walk_script(&mut self, src: &str, depth: usize, stdin: Stdin) {
        self.walk_script_ctx(src, depth, Ctx::nested(stdin));
    }

    /// Parses and walks a piece of shell code run in a given context.
    pub(crate) fn walk_script_ctx(&mut self, src: &str, depth: usize, ctx: Ctx) {
        if self.deep(depth) || !self.tick() {
            return;
        }
        self.check_text(src);
        let program = match parse::program(src) {
            Ok(program) => program,
            Err(reason) => {
                self.note(ShellClass::Always, reason);
                return;
            }
        };
        let outer = std::mem::replace(&mut self.source, src.chars().collect());
        for list in &program.complete_commands {
            self.walk_list(list, ctx, depth);
        }
        self.source = outer;
    }

    pub(crate) fn walk_list(&mut self, list: &ast::CompoundList, ctx: Ctx, depth: usize) {
        if self.deep(depth) {
            return;
        }
        for ast::CompoundListItem(and_or, sep) in &list.0 {
            let background = matches!(sep, ast::SeparatorOperator::Async);
            let ctx = Ctx {
                background: ctx.background || background,
                ..ctx
            };
            self.walk_pipeline(&and_or.first, ctx, depth);
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => self.walk_pipeline(p, ctx, depth),
                }
            }
        }
    }

    pub(crate) fn walk_pipeline(&mut self, pipeline: &ast::Pipeline, ctx: Ctx, depth: usize) {
        let many = pipeline.seq.len() > 1;
        for (i, command) in pipeline.seq.iter().enumerate() {
            let ctx = Ctx {
                stdin: if i == 0 { ctx.stdin } else { Stdin::Piped },
                pipeline: ctx.pipeline || many,
                ..ctx
            };
            self.walk_command(command, ctx, depth);
        }
    }

    pub(crate) fn walk_command(&mut self, command: &ast::Command, ctx: Ctx, depth: usize) {
        if self.deep(depth) || !self.tick() {
            return;
        }
        self.commands_seen += 1;
        match command {
            ast::Command::Simple(simple) => self.walk_simple(simple, ctx, depth),
            ast::Command::Compound(compound, redirects) => {
                let stdin = self.walk_redirect_list(redirects.as_ref(), ctx, depth);
                let ctx = Ctx { stdin, ..ctx };
                self.walk_compound(compound, ctx, depth + 1);
            }
            ast::Command::Function(def) => self.walk_function(def, depth + 1),
            ast::Command::ExtendedTest(test, redirects) => {
                self.walk_redirect_list(redirects.as_ref(), ctx, depth);
                self.walk_extended_test(&test.expr, ctx, depth + 1);
            }
        }
    }

    /// Walks the redirections of a compound command; returns the stdin its body sees.
    pub(crate) fn walk_redirect_list(
        &mut self,
        redirects: Option<&ast::RedirectList>,
        ctx: Ctx,
        depth: usize,
    ) -> Stdin {
        let mut input = match ctx.stdin {
            Stdin::Inherited => Input::Inherited,
            Stdin::Piped => Input::Piped,
        };
        if let Some(list) = redirects {
            for r in &list.0 {
                self.walk_redirect(r, ctx, depth, &mut input);
            }
        }
        input.as_stdin()
    }

    pub(crate) fn walk_function(&mut self, def: &ast::FunctionDefinition, depth: usize) {
        if self.deep(depth) {
            return;
        }
        let name = def.fname.value.clone();
        self.functions.push(name);
        let ast::FunctionBody(body, redirects) = &def.body;
        let stdin = self.walk_redirect_list(redirects.as_ref(), Ctx::default(), depth);
        self.walk_compound(body, Ctx::nested(stdin), depth + 1);
        self.functions.pop();
    }

    pub(crate) fn walk_compound(
        &mut self,
        compound: &ast::CompoundCommand,
        ctx: Ctx,
        depth: usize,
    ) {
        if self.deep(depth) {
            return;
        }
        let plain = Ctx::nested(ctx.stdin);
        match compound {
            ast::CompoundCommand::Arithmetic(a) => {
                // brush-parser reads `( ( cmd ) )` and `((cmd) )` as arithmetic; bash reads them
                // as nested subshells. Only adjacent `((` … `))` is arithmetic in bash, and even
                // that is two subshells in a POSIX shell such as dash (the shell tool's fallback
                // and what `sh -c` runs on many systems), so that reading is walked too.
                let span = self
                    .source
                    .get(a.loc.start.index..a.loc.end.index)
                    .map(|chars| chars.iter().collect::<String>().trim().to_owned());
                let squeeze =
                    |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
                match span {
                    Some(text)
                        if text.starts_with("((") && text.ends_with("))") && text.len() >= 4 =>
                    {
                        if squeeze(&text[2..text.len() - 2]) != squeeze(&a.expr.value) {
                            self.note(
                                ShellClass::Always,
                                "cannot parse (arithmetic changed by the parser)",
                            );
                        }
                        self.walk_arithmetic(&a.expr.value, plain, depth);
                        let mut inner = self.sub_walker();
                        inner.walk_script(&text[2..text.len() - 2], depth + 1, ctx.stdin);
                        self.absorb(inner, |r| !r.starts_with("cannot parse"));
                    }
                    Some(text)
                        if text.starts_with('(') && text.ends_with(')') && text.len() >= 2 =>
                    {
                        let inner = &text[1..text.len() - 1];
                        self.walk_script(inner, depth + 1, ctx.stdin);
                    }
                    _ => {
                        self.walk_arithmetic(&a.expr.value, plain, depth);
                        self.walk_script(&a.expr.value, depth + 1, ctx.stdin);
                    }
                }
            }
            ast::CompoundCommand::ArithmeticForClause(f) => {
                for e in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.walk_arithmetic(&e.value, plain, depth);
                }
                self.walk_list(&f.body.list, ctx, depth + 1);
            }
            ast::CompoundCommand::BraceGroup(g) => self.walk_list(&g.list, ctx, depth + 1),
            ast::CompoundCommand::Subshell(s) => self.walk_list(&s.list, ctx, depth + 1),
            ast::CompoundCommand::ForClause(f) => {
                self.assigned.insert(f.variable_name.clone());
                if let Some(values) = &f.values {
                    for w in values {
                        let arg = self.ast_word(w, plain, depth);
                        self.check_text(&arg.text());
                    }
                }
                self.walk_list(&f.body.list, ctx, depth + 1);
            }
            ast::CompoundCommand::CaseClause(c) => {
                self.ast_word(&c.value, plain, depth);
                for item in &c.cases {
                    for p in &item.patterns {
                        self.ast_word(p, plain, depth);
                    }
                    if let Some(list) = &item.cmd {
                        self.walk_list(list, ctx, depth + 1);
                    }
                }
            }
            ast::CompoundCommand::IfClause(i) => {
                self.walk_list(&i.condition, ctx, depth + 1);
                self.walk_list(&i.then, ctx, depth + 1);
                for e in i.elses.iter().flatten() {
                    if let Some(cond) = &e.condition {
                        self.walk_list(cond, ctx, depth + 1);
                    }
                    self.walk_list(&e.body, ctx, depth + 1);
                }
            }
            ast::CompoundCommand::WhileClause(w) | ast::CompoundCommand::UntilClause(w) => {
                self.walk_list(&w.0, ctx, depth + 1);
                self.walk_list(&w.1.list, ctx, depth + 1);
            }
            ast::CompoundCommand::Coprocess(c) => {
                if let Some(name) = &c.name {
                    self.ast_word(name, plain, depth);
                }
                let ctx = Ctx {
                    background: true,
                    ..ctx
                };
                self.walk_command(&c.body, ctx, depth + 1);
            }
        }
    }

    pub(crate) fn walk_extended_test(
        &mut self,
        expr: &ast::ExtendedTestExpr,
        ctx: Ctx,
        depth: usize,
    ) {
        if self.deep(depth) || !self.tick() {
            return;
        }
        match expr {
            ast::ExtendedTestExpr::And(a, b) | ast::ExtendedTestExpr::Or(a, b) => {
                self.walk_extended_test(a, ctx, depth + 1);
                self.walk_extended_test(b, ctx, depth + 1);
            }
            ast::ExtendedTestExpr::Not(a) | ast::ExtendedTestExpr::Parenthesized(a) => {
                self.walk_extended_test(a, ctx, depth + 1);
            }
            ast::ExtendedTestExpr::UnaryTest(_, w) => {
                let arg = self.ast_word(w, Ctx::nested(ctx.stdin), depth);
                self.check_arg_common(&arg);
                self.check_arith_injection(&arg, depth);
            }
            ast::ExtendedTestExpr::BinaryTest(_, a, b) => {
                for w in [a, b] {
                    let arg = self.ast_word(w, Ctx::nested(ctx.stdin), depth);
                    self.check_arg_common(&arg);
                    self.check_arith_injection(&arg, depth);
                }
            }
        }
    }

    /// Arithmetic text (`$(( … ))`, `(( … ))`, subscripts): substitutions inside run.
    pub(crate) fn walk_arithmetic(&mut self, text: &str, ctx: Ctx, depth: usize) {
        if self.deep(depth) || !self.tick() {
            return;
        }
        self.check_text(text);
        // Quotes do not quote inside arithmetic: `$(( '$(cmd)' ))` runs cmd.
        let parsed = word::parse_heredoc(text, &ParserOptions::default())
            .or_else(|_| word::parse(text, &ParserOptions::default()));
        match parsed {
            Ok(pieces) => {
                let mut arg = Arg::default();
                self.pieces(&pieces, false, &mut arg, ctx, depth + 1);
                let literal: String = arg
                    .chars
                    .iter()
                    .filter(|(_, k)| *k != Kind::Dynamic)
                    .map(|(c, _)| *c)
                    .collect();
                if literal.contains("$(") || literal.contains('`') {
                    self.note(ShellClass::Always, "command substitution inside arithmetic");
                }
            }
            Err(_) => {
                if text.contains("$(") || text.contains('`') {
                    self.note(ShellClass::Always, "cannot parse arithmetic");
                }
            }
        }
    }

    /// A literal value that bash evaluates arithmetically (array subscripts in `let`, `declare`,
    /// `test`, `[[ ]]`, `read`, `printf -v`, …) runs the substitutions it contains.
    pub(crate) fn check_arith_injection(&mut self, arg: &Arg, depth: usize) {
        let text = arg.text();
        if arg.is_static() && (text.contains("$(") || text.contains('`')) {
            self.walk_arithmetic(&text, Ctx::default(), depth + 1);
            self.note(
                ShellClass::Always,
                "quoted command substitution in an arithmetic context",
            );
        }
    }

    pub(crate) fn sub_walker(&self) -> Walker<'a> {
        Walker {
            secrets: self.secrets,
            notes: Vec::new(),
            steps: self.steps,
            functions: self.functions.clone(),
            assigned: HashSet::new(),
            deferred: Vec::new(),
            commands_seen: 0,
            guessing: self.guessing,
            source: Vec::new(),
        }
    }

    pub(crate) fn absorb(&mut self, inner: Walker<'_>, keep: impl Fn(&str) -> bool) {
        self.steps = inner.steps;
        for (c, r) in inner.notes {
            if keep(&r) {
                self.note(c, r);
            }
        }
        self.assigned.extend(inner.assigned);
        self.deferred.extend(inner.deferred);
    }
}
