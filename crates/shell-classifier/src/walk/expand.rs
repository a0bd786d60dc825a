//! Words of the syntax tree as bash expands them: the check that the parser kept each word as
//! written, quote removal, substitutions (walked as scripts), parameter expansions and their
//! operands, tilde and arithmetic expansions.

use brush_parser::ast;
use brush_parser::word::{self, Parameter, ParameterExpr, WordPiece, WordPieceWithSource};
use brush_parser::ParserOptions;

use super::{Ctx, Walker};
use crate::secrets::secret_variable;
use crate::words::{
    decode_ansi_c, ends_in_comment, parameter_name, parameter_parts, tilde_text,
    unescape_backquoted, Arg, Kind,
};
use crate::ShellClass;

impl<'a> Walker<'a> {
    /// [`Self::word`] for a word of the syntax tree, after checking that the parser kept it as
    /// written: a word that differs from its source text was mangled by the tokenizer (it does so
    /// with substitutions on the line of a pending here-document), so what bash runs is unknown.
    pub(crate) fn ast_word(&mut self, w: &ast::Word, ctx: Ctx, depth: usize) -> Arg {
        self.verify_word(w);
        self.word(&w.value, ctx, depth)
    }

    pub(crate) fn verify_word(&mut self, w: &ast::Word) {
        let Some(loc) = &w.loc else {
            return;
        };
        let source: Option<String> = self
            .source
            .get(loc.start.index..loc.end.index)
            .map(|chars| chars.iter().collect());
        // Positions after a pending here-document can be one off, hence the trimming.
        let matches = source.is_some_and(|text| {
            let text = text.trim();
            text == w.value || text.replace("\\\n", "") == w.value
        });
        if !matches {
            self.note(
                ShellClass::Always,
                "cannot parse (word changed by the parser)",
            );
        }
    }

    /// A here-document body starts on a line after its `<<` operator; brush-parser sometimes
    /// loses tokens around here-documents inside `((…) )`, which shows up as a body on the same
    /// line.
    pub(crate) fn verify_here_document(&mut self, doc: &ast::IoHereDocument) {
        let (Some(end), Some(body)) = (&doc.here_end.loc, &doc.doc.loc) else {
            return;
        };
        if doc.doc.value.is_empty() {
            return;
        }
        let between = self.source.get(end.end.index..body.start.index);
        if !between.is_some_and(|chars| chars.contains(&'\n')) {
            self.note(ShellClass::Always, "cannot parse (here-document)");
        }
    }

    /// Parses a word, walks the commands it runs, and returns it after quote removal.
    pub(crate) fn word(&mut self, raw: &str, ctx: Ctx, depth: usize) -> Arg {
        let mut arg = Arg::default();
        if !self.tick() {
            arg.push_str(raw, Kind::Dynamic);
            return arg;
        }
        if self.deep(depth) {
            arg.push_str(raw, Kind::Dynamic);
            return arg;
        }
        match word::parse(raw, &ParserOptions::default()) {
            Ok(pieces) => self.pieces(&pieces, false, &mut arg, ctx, depth),
            Err(_) => {
                self.note(ShellClass::Always, "cannot parse (word)");
                arg.push_str(raw, Kind::Dynamic);
                arg.opaque = true;
            }
        }
        arg
    }

    pub(crate) fn pieces(
        &mut self,
        pieces: &[WordPieceWithSource],
        quoted: bool,
        arg: &mut Arg,
        ctx: Ctx,
        depth: usize,
    ) {
        if self.deep(depth) {
            return;
        }
        let literal = if quoted { Kind::Quoted } else { Kind::Unquoted };
        // Literal text (unquoted or double-quoted) just before the current piece.
        let mut text_before = String::new();
        for p in pieces {
            if let WordPiece::Text(s) = &p.piece {
                // brush-parser keeps a substitution it cannot parse as literal text (`$`,
                // `(cmd …`); bash would run it. Such text means the word was not understood.
                text_before.push_str(s);
                if ["$(", "${", "$[", "`"]
                    .iter()
                    .any(|m| text_before.contains(m))
                {
                    self.note(ShellClass::Always, "cannot parse (substitution)");
                }
            } else {
                text_before.clear();
            }
            match &p.piece {
                WordPiece::Text(s) => arg.push_str(s, literal),
                WordPiece::SingleQuotedText(s) => arg.push_str(s, Kind::Quoted),
                WordPiece::AnsiCQuotedText(s) => arg.push_str(&decode_ansi_c(s), Kind::Quoted),
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(inner, true, arg, ctx, depth + 1);
                }
                WordPiece::TildeExpansion(t) => arg.push_str(&tilde_text(t), Kind::Quoted),
                WordPiece::ParameterExpansion(e) => self.parameter(e, arg, ctx, depth),
                WordPiece::CommandSubstitution(s) => {
                    if ends_in_comment(s) {
                        // bash does not close `$(` inside a comment; brush-parser's word parser
                        // does, so the text after it would be misread as literal.
                        self.note(ShellClass::Always, "cannot parse (comment in substitution)");
                    }
                    self.walk_script(s, depth + 1, ctx.stdin);
                    arg.push_str("$(…)", Kind::Dynamic);
                    arg.cmdsub = true;
                }
                WordPiece::BackquotedCommandSubstitution(s) => {
                    self.walk_script(&unescape_backquoted(s, quoted), depth + 1, ctx.stdin);
                    arg.push_str("$(…)", Kind::Dynamic);
                    arg.cmdsub = true;
                }
                WordPiece::EscapeSequence(s) => {
                    let rest: String = s.chars().skip(1).collect();
                    if rest != "\n" {
                        arg.push_str(&rest, Kind::Quoted);
                    }
                }
                WordPiece::ArithmeticExpression(e) => {
                    self.walk_arithmetic(&e.value, ctx, depth + 1);
                    arg.push_str("$((…))", Kind::Dynamic);
                    arg.opaque = true;
                }
            }
        }
    }

    pub(crate) fn parameter(&mut self, e: &ParameterExpr, arg: &mut Arg, ctx: Ctx, depth: usize) {
        let (param, indirect, nested) = parameter_parts(e);
        if indirect {
            self.note(ShellClass::Always, "indirect variable expansion");
        }
        if matches!(
            e,
            ParameterExpr::Transform {
                op: word::ParameterTransformOp::PromptExpand,
                ..
            }
        ) {
            self.note(ShellClass::Always, "prompt expansion of a variable");
        }
        if let Some(Parameter::NamedWithIndex { index, .. }) = param {
            self.walk_arithmetic(index, ctx, depth + 1);
        }
        for s in nested {
            if s.contains('$') || s.contains('`') || s.contains('<') || s.contains('>') {
                let inner = self.word(s, ctx, depth + 1);
                self.check_text(&inner.text());
                // Inside double quotes, single quotes in these operands do not quote: bash runs
                // the `$(…)` in `"${x:-'$(cmd)'}"`. Walk that reading too.
                if s.contains('\'') {
                    if let Ok(pieces) = word::parse_heredoc(s, &ParserOptions::default()) {
                        let mut ignored = Arg::default();
                        self.pieces(&pieces, true, &mut ignored, ctx, depth + 1);
                    }
                }
            }
        }
        let name = param.and_then(parameter_name);
        if let Some(name) = name {
            self.check_text(name);
            if secret_variable(name) {
                self.note(
                    ShellClass::Always,
                    format!("uses a secret-looking variable (${name})"),
                );
            }
        }
        match (e, name) {
            (
                ParameterExpr::Parameter {
                    parameter: Parameter::Named(n),
                    indirect: false,
                },
                _,
            ) => {
                arg.push_str(&format!("${n}"), Kind::Dynamic);
                arg.vars.push(n.clone());
            }
            (_, Some(n)) => {
                arg.push_str(&format!("${{{n}…}}"), Kind::Dynamic);
                arg.opaque = true;
            }
            _ => {
                arg.push_str("${…}", Kind::Dynamic);
                arg.opaque = true;
            }
        }
    }
}
