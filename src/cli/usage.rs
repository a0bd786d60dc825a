//! `ethan usage [--days N] [--by day|model|chat]`: the tokens of the model calls of the last N
//! local days (today included, in the configured zone), as a table with a total row. Reads the
//! store directly; works whether or not the daemon runs.

use crate::config::Loaded;
use crate::usage::{approx, day_of, local_day, thousands, zone, APPROX_NOTE};
use ethan_core::store::{UsageGrouping, UsageRow};
use std::process::ExitCode;

/// What the rows of `ethan usage` are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum By {
    /// One row per local day
    Day,
    /// One row per model
    Model,
    /// One row per chat (`<channel>:<chat id>`)
    Chat,
}

/// Print the table for the last `days` days (at least 1: today), grouped `by`.
pub async fn print(loaded: &Loaded, days: u32, by: By) -> anyhow::Result<ExitCode> {
    if days == 0 {
        anyhow::bail!("--days must be at least 1 (1 is today)");
    }
    let store = crate::daemon::open_store::open(loaded).await?.main;
    let zone = zone(&loaded.config);
    let first = local_day(zone, chrono::Utc::now(), u64::from(days - 1));
    let grouping = match by {
        By::Day => UsageGrouping::Day(day_of(zone)),
        By::Model => UsageGrouping::Model,
        By::Chat => UsageGrouping::Chat,
    };
    let rows = store.usage_report(first.start, grouping).await?;
    if rows.is_empty() {
        println!(
            "no model calls recorded in the last {days} day{}",
            if days == 1 { "" } else { "s" }
        );
        return Ok(ExitCode::SUCCESS);
    }
    let key = match by {
        By::Day => "DAY",
        By::Model => "MODEL",
        By::Chat => "CHAT",
    };
    for line in table(key, &rows) {
        println!("{line}");
    }
    if rows.iter().any(|r| r.estimated_calls > 0) {
        println!("({APPROX_NOTE})");
    }
    println!(
        "(since {} {}; total = input + output)",
        crate::tz::to_local(
            &zone,
            chrono::DateTime::from_timestamp(first.start, 0).unwrap_or_default()
        )
        .format("%Y-%m-%d %H:%M"),
        zone.name()
    );
    Ok(ExitCode::SUCCESS)
}

/// The lines of the table: a header, one line per row, a `TOTAL` line; the key column is
/// left-aligned, the counts right-aligned with thousands separators, the token counts of a row
/// that includes estimated calls led by `≈`. `CACHE HIT` is the share of the input tokens read
/// from the provider's prompt cache (`-` without input).
pub fn table(key: &str, rows: &[UsageRow]) -> Vec<String> {
    let mut total = UsageRow {
        key: "TOTAL".into(),
        ..UsageRow::default()
    };
    for r in rows {
        total.add_row(r);
    }
    let cells = |r: &UsageRow| -> [String; 8] {
        let est = r.estimated_calls > 0;
        [
            r.key.clone(),
            thousands(r.calls),
            approx(r.input_tokens, est),
            approx(r.output_tokens, est),
            thousands(r.cache_read_tokens),
            thousands(r.cache_write_tokens),
            hit_rate(r),
            approx(r.total(), est),
        ]
    };
    let mut grid = vec![[
        key.to_string(),
        "CALLS".into(),
        "INPUT".into(),
        "OUTPUT".into(),
        "CACHE READ".into(),
        "CACHE WRITE".into(),
        "CACHE HIT".into(),
        "TOTAL".into(),
    ]];
    grid.extend(rows.iter().map(cells));
    grid.push(cells(&total));
    let widths: Vec<usize> = (0..8)
        .map(|c| grid.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    grid.iter()
        .map(|r| {
            r.iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (cell, w))| {
                    if i == 0 {
                        format!("{cell:<w$}")
                    } else {
                        format!("{cell:>w$}")
                    }
                })
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        })
        .collect()
}

/// The share of `r`'s input tokens read from the prompt cache, in whole percent (`-` when it has
/// no input tokens).
fn hit_rate(r: &UsageRow) -> String {
    if r.input_tokens == 0 {
        return "-".into();
    }
    let pct =
        (r.cache_read_tokens.min(r.input_tokens) as f64 * 100.0 / r.input_tokens as f64).round();
    format!("{pct}%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_and_the_total_adds_the_rows() {
        let rows = [
            UsageRow {
                key: "gpt-4o".into(),
                calls: 2,
                input_tokens: 12_000,
                output_tokens: 345,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                estimated_calls: 0,
            },
            UsageRow {
                key: "m".into(),
                calls: 1,
                input_tokens: 7,
                output_tokens: 3,
                cache_read_tokens: 4,
                cache_write_tokens: 1,
                estimated_calls: 1,
            },
        ];
        let lines = table("MODEL", &rows);
        assert_eq!(
            lines,
            [
                "MODEL   CALLS    INPUT  OUTPUT  CACHE READ  CACHE WRITE  CACHE HIT    TOTAL",
                "gpt-4o      2   12,000     345           0            0         0%   12,345",
                "m           1       ≈7      ≈3           4            1        57%      ≈10",
                "TOTAL       3  ≈12,007    ≈348           4            1         0%  ≈12,355",
            ]
        );
    }
}
