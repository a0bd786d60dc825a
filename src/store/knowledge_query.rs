//! A keyword query split for the knowledge indexes, and reciprocal rank fusion — what both
//! backends of the knowledge index ([`super::knowledge_index::KnowledgeIndex`]) take and use.
//!
//! The query is split into terms (runs of letters and digits; a run of CJK characters is a term
//! of its own, so `Rust部署` is `rust` + `部署`), and each term goes where it can be matched:
//! - three characters or more → substring matching (SQLite: the FTS5 trigram index;
//!   PostgreSQL: `ILIKE`, served by `pg_trgm`); a CJK run longer than three characters is
//!   given as its overlapping trigrams, so `如何部署服务器` finds a note that says `服务器部署`;
//! - a two-character CJK word (`部署`) → the CJK bigram index (SQLite) or `ILIKE`;
//! - anything shorter (`Go`, `猫`) → `LIKE` over title, tags and body, when the query has
//!   nothing longer (a scan of every note: correct, but the slow path).

use std::collections::{HashMap, HashSet};

/// Most terms taken from one query.
const MAX_TERMS: usize = 24;
/// The `k` of reciprocal rank fusion: `score = Σ 1 / (k + rank)`.
pub const RRF_K: f64 = 60.0;

/// Whether `c` is a CJK ideograph, kana or hangul syllable.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30ff | 0x3400..=0x4dbf | 0x4e00..=0x9fff | 0xf900..=0xfaff
        | 0xac00..=0xd7af | 0x20000..=0x2ffff)
}

/// A search query split for the indexes (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// Phrases for the trigram index (three characters or more).
    pub fts: Vec<String>,
    /// Two-character CJK words, for the bigram index.
    pub cjk: Vec<String>,
    /// The bigrams of longer CJK runs, for filling up.
    pub cjk_fill: Vec<String>,
    /// Shorter terms (one or two characters, not a CJK pair), for `LIKE`.
    pub short: Vec<String>,
    /// Every term, for snippets.
    pub all: Vec<String>,
}

fn push(v: &mut Vec<String>, t: String) {
    if !v.contains(&t) && v.len() < MAX_TERMS {
        v.push(t);
    }
}

/// Terms as an FTS5 expression: quoted phrases joined by `OR`.
pub fn phrases(terms: &[String]) -> String {
    terms
        .iter()
        .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" OR ")
}

impl Query {
    pub fn parse(q: &str) -> Query {
        let mut terms: Vec<String> = Vec::new();
        for word in q.split(|c: char| !(c.is_alphanumeric() || "_-.+#@".contains(c))) {
            let word = word.trim_matches(|c: char| "-.".contains(c)).to_lowercase();
            // Split at boundaries between CJK and other scripts.
            let mut cur = String::new();
            let mut cur_cjk = None;
            for c in word.chars() {
                let k = is_cjk(c);
                if cur_cjk.is_some_and(|p| p != k) && !cur.is_empty() {
                    terms.push(std::mem::take(&mut cur));
                }
                cur_cjk = Some(k);
                cur.push(c);
            }
            if !cur.is_empty() {
                terms.push(cur);
            }
        }
        let mut seen = HashSet::new();
        terms.retain(|t| !t.is_empty() && seen.insert(t.clone()));
        terms.truncate(MAX_TERMS);

        let mut out = Query {
            all: terms.clone(),
            ..Query::default()
        };
        for t in terms {
            let chars: Vec<char> = t.chars().collect();
            let cjk = chars.iter().copied().all(is_cjk);
            match (cjk, chars.len()) {
                (true, 2) => push(&mut out.cjk, t),
                (_, 0..=2) => push(&mut out.short, t),
                (true, n) => {
                    if n == 3 {
                        push(&mut out.fts, t);
                    } else {
                        for w in chars.windows(3) {
                            push(&mut out.fts, w.iter().collect());
                        }
                    }
                    for w in chars.windows(2) {
                        push(&mut out.cjk_fill, w.iter().collect());
                    }
                }
                (false, _) => push(&mut out.fts, t),
            }
        }
        out
    }

    /// The FTS5 expression for the trigram index: the phrases joined by `OR`, or `None`.
    pub fn fts_expression(&self) -> Option<String> {
        (!self.fts.is_empty()).then(|| phrases(&self.fts))
    }

    /// The FTS5 expression for the bigram index, or `None`.
    pub fn cjk_expression(&self) -> Option<String> {
        (!self.cjk.is_empty()).then(|| phrases(&self.cjk))
    }
}

/// Reciprocal rank fusion of ranked lists of ids (best first): `(id, score)`, best first.
pub fn rrf(lists: &[Vec<i64>]) -> Vec<(i64, f64)> {
    let mut scores: HashMap<i64, f64> = HashMap::new();
    for list in lists {
        for (rank, id) in list.iter().enumerate() {
            *scores.entry(*id).or_default() += 1.0 / (RRF_K + rank as f64 + 1.0);
        }
    }
    let mut out: Vec<(i64, f64)> = scores.into_iter().collect();
    ethan_core::sort::sort_by(&mut out, |a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Query {
        Query::parse(s)
    }

    #[test]
    fn queries_split_by_script_and_length() {
        let x = q("Deploy the server, Go!");
        assert_eq!(x.fts, ["deploy", "the", "server"]);
        assert_eq!(x.short, ["go"]);
        assert!(x.cjk.is_empty() && x.cjk_fill.is_empty());
        let x = q("Rust部署 猫");
        assert_eq!(x.fts, ["rust"]);
        assert_eq!(x.cjk, ["部署"]);
        assert_eq!(x.short, ["猫"]);
        let x = q("如何部署服务器");
        assert_eq!(x.fts, ["如何部", "何部署", "部署服", "署服务", "服务器"]);
        assert!(x.cjk_fill.contains(&"部署".to_string()));
        assert_eq!(q("服务器").fts, ["服务器"]);
        assert_eq!(
            q("say \"hi\" OR NOT x*").fts_expression().unwrap(),
            "\"say\" OR \"not\""
        );
        assert_eq!(q("   ").fts_expression(), None);
        assert_eq!(q("a\"b").all, ["a", "b"]);
    }

    #[test]
    fn rrf_rewards_agreement() {
        let fused = rrf(&[vec![1, 2, 3], vec![2, 9]]);
        assert_eq!(fused[0].0, 2);
        assert_eq!(fused.len(), 4);
        assert_eq!(fused.last().unwrap().0, 3);
    }
}
