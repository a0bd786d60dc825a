//! The card model: four templates holding normalised text, nothing platform-specific.
//!
//! A [`Card`] is built by [`Card::from_json`](crate::Card::from_json) from what the model sent
//! (see [`parse`](crate::parse) for the accepted shapes) and is already clean when it exists:
//! literal `\n` turned into newlines, numbers turned into text, compare rows exactly as wide as
//! the columns, bullet markers stripped from timeline items. Renderers only lay it out.
//!
//! The serde form (`{"type": "compare", ...}`) is the tool's input form, and `Deserialize` goes
//! through the same lenient parser, so a serialised card always parses back to itself.

use serde::Serialize;

/// One of the four card templates.
///
/// Serialised with an inner `type` tag: `{"type": "rank", "title": ..., "items": [...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Card {
    /// A table: options side by side.
    Compare(Compare),
    /// A numbered list, best first.
    Rank(Rank),
    /// A few headline numbers.
    Stats(Stats),
    /// Events or steps in order.
    Timeline(Timeline),
}

impl Card {
    /// The template's name as the model writes it: `compare`, `rank`, `stats`, `timeline`.
    pub fn kind(&self) -> &'static str {
        match self {
            Card::Compare(_) => "compare",
            Card::Rank(_) => "rank",
            Card::Stats(_) => "stats",
            Card::Timeline(_) => "timeline",
        }
    }

    /// The card's title, if it has one (only `stats` may go without).
    pub fn title(&self) -> Option<&str> {
        match self {
            Card::Compare(c) => Some(&c.title),
            Card::Rank(r) => Some(&r.title),
            Card::Stats(s) => s.title.as_deref(),
            Card::Timeline(t) => Some(&t.title),
        }
    }
}

/// A comparison table. Every row has exactly `columns.len()` cells (short rows were padded with
/// empty cells, long ones cut). The first column is the row's label and renderers emphasise it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Compare {
    /// Header text (one line in most renderers).
    pub title: String,
    /// Column names, at least one.
    pub columns: Vec<String>,
    /// Cells, row by row; may be empty. Serialised in the tool's input form,
    /// `[{"values": [...]}, ...]`.
    #[serde(serialize_with = "rows_as_values")]
    pub rows: Vec<Vec<String>>,
}

fn rows_as_values<S: serde::Serializer>(rows: &[Vec<String>], s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Row<'a> {
        values: &'a [String],
    }
    s.collect_seq(rows.iter().map(|r| Row { values: r }))
}

/// A ranking. Numbers (1., 2., …) are generated from the order of `items`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rank {
    /// Header text.
    pub title: String,
    /// A line under the title (Lark: the header subtitle).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subtitle: Option<String>,
    /// Entries, best first; may be empty.
    pub items: Vec<RankItem>,
}

/// One entry of a [`Rank`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RankItem {
    /// What is ranked (one line).
    pub name: String,
    /// Shown beside the name, as given (`"9.5"`, `"$12"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<String>,
    /// A line or two under the name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desc: Option<String>,
}

/// Headline metrics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Header text; the only template where it may be missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The numbers, in order; laid out three to a row where there is room. May be empty.
    pub metrics: Vec<Metric>,
}

/// One number of a [`Stats`] card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Metric {
    /// What is measured (one line).
    pub label: String,
    /// The big value, as given (`"1,204"`, `"98.5%"`).
    pub value: String,
    /// Change, as given (`"+12%"`, `"↓ 3"`). A leading `+`/`↑`/`▲` reads as up, `-`/`↓`/`▼`
    /// as down; see [`Trend`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trend: Option<String>,
}

impl Metric {
    /// Which way the trend points, judged from its first character.
    pub fn trend_direction(&self) -> Trend {
        Trend::of(self.trend.as_deref().unwrap_or(""))
    }
}

/// Direction of a [`Metric::trend`], for colouring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trend {
    /// Going up (green on Lark).
    Up,
    /// Going down (red on Lark).
    Down,
    /// Neither, or not said (grey).
    Flat,
}

impl Trend {
    /// `+ ↑ ▲ ↗ 📈` → up, `- − ↓ ▼ ↘ 📉` → down, anything else → flat.
    pub fn of(text: &str) -> Trend {
        match text.trim_start().chars().next() {
            Some('+' | '↑' | '▲' | '↗' | '📈') => Trend::Up,
            Some('-' | '−' | '↓' | '▼' | '↘' | '📉') => Trend::Down,
            _ => Trend::Flat,
        }
    }
}

/// Events or steps, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Timeline {
    /// Header text.
    pub title: String,
    /// Sections, in order; may be empty.
    pub nodes: Vec<TimelineNode>,
}

/// One section of a [`Timeline`]: a title, then either a paragraph (`body`) or a list
/// (`items`). When the model sent both, `items` won and `body` is `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TimelineNode {
    /// The section heading, e.g. a date or a step name (one line).
    pub title: String,
    /// A paragraph; may hold newlines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Bullet points, markers (`- * • +`) already stripped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<String>,
}
