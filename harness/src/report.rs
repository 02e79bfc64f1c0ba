//! The kernel × check table: short cells (hits, or a numbered failure), then every failure's
//! reason below the table, so a red cell always says why and nothing drops out.

use crate::checks::CheckResult;
use crate::kernels::{all_columns, expected_columns, KernelRow};

/// Table flavours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Plain text with ANSI colours (green passes, red failures).
    Terminal {
        /// Emit colour escapes.
        color: bool,
    },
    /// A Markdown table (for BENCHMARKS.md / README), failures in bold.
    Markdown,
}

fn cell(r: &CheckResult) -> String {
    match (r.ok, r.hits) {
        (true, Some(h)) => format!("ok {h} hits"),
        (true, None) => "ok".into(),
        (false, Some(h)) => format!("FAIL {h} hits"),
        (false, None) => "FAIL".into(),
    }
}

/// Renders `rows` as a table followed by the numbered failure reasons. Returns the text and
/// whether every cell passed.
pub fn render(rows: &[KernelRow], style: Style) -> (String, bool) {
    let cols = all_columns();
    let mut failures: Vec<String> = Vec::new();
    let mut grid: Vec<Vec<(String, bool)>> = Vec::new();
    for row in rows {
        let mut cells = vec![(format!("{} ({})", row.name, row.release), true)];
        for col in &cols {
            let r = row.results.iter().find(|r| &r.check == col);
            let (text, ok) = match r {
                Some(r) if r.ok => (cell(r), true),
                Some(r) => {
                    failures.push(format!("{} / {}: {}", row.name, col, r.detail));
                    (format!("{} [{}]", cell(r), failures.len()), false)
                }
                // A column of another architecture's table (its check is not run on this one).
                None if !expected_columns(row.arch).contains(col) => ("n/a".into(), true),
                None => {
                    failures.push(format!("{} / {}: no result", row.name, col));
                    (format!("FAIL [{}]", failures.len()), false)
                }
            };
            cells.push((text, ok));
        }
        grid.push(cells);
    }
    let mut header = vec!["kernel".to_string()];
    header.extend(cols.iter().cloned());
    let all_ok = failures.is_empty();
    let mut out = String::new();
    match style {
        Style::Markdown => {
            out.push_str(&format!("| {} |\n", header.join(" | ")));
            out.push_str(&format!("|{}\n", "---|".repeat(header.len())));
            for cells in &grid {
                let texts: Vec<String> = cells
                    .iter()
                    .map(|(t, ok)| if *ok { t.clone() } else { format!("**{t}**") })
                    .collect();
                out.push_str(&format!("| {} |\n", texts.join(" | ")));
            }
            if !failures.is_empty() {
                out.push('\n');
                for (i, f) in failures.iter().enumerate() {
                    out.push_str(&format!("{}. {}\n", i + 1, f.replace('|', "\\|")));
                }
            }
        }
        Style::Terminal { color } => {
            let widths: Vec<usize> = (0..header.len())
                .map(|i| {
                    grid.iter()
                        .map(|c| c[i].0.chars().count())
                        .chain(std::iter::once(header[i].chars().count()))
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            let line = |cells: Vec<(String, bool)>| -> String {
                let mut s = String::new();
                for (i, (t, ok)) in cells.iter().enumerate() {
                    let pad = widths[i] - t.chars().count();
                    let text = if color && i > 0 {
                        let code = if *ok { "32" } else { "1;31" };
                        format!("\x1b[{code}m{t}\x1b[0m")
                    } else {
                        t.clone()
                    };
                    s.push_str(&text);
                    s.push_str(&" ".repeat(pad));
                    s.push_str("  ");
                }
                s.trim_end().to_string()
            };
            out.push_str(&line(header.iter().map(|h| (h.clone(), true)).collect()));
            out.push('\n');
            for cells in grid {
                out.push_str(&line(cells));
                out.push('\n');
            }
            for (i, f) in failures.iter().enumerate() {
                let text = format!("[{}] {}", i + 1, f);
                if color {
                    out.push_str(&format!("\x1b[31m{text}\x1b[0m\n"));
                } else {
                    out.push_str(&text);
                    out.push('\n');
                }
            }
        }
    }
    (out, all_ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_or_missing_cell_is_red_and_explained() {
        let row = KernelRow {
            name: "debian-6.1".into(),
            arch: crate::guest_arch::GuestArch::X86_64,
            release: "6.1.0-56-amd64".into(),
            results: vec![
                CheckResult {
                    check: "boot".into(),
                    ok: true,
                    hits: None,
                    detail: String::new(),
                    seconds: 5.0,
                },
                CheckResult::failed("tracefs", "no uprobe_events"),
            ],
            seconds: 5.0,
        };
        let (text, ok) = render(std::slice::from_ref(&row), Style::Terminal { color: false });
        assert!(!ok);
        assert!(
            text.contains("[1] debian-6.1 / tracefs: no uprobe_events"),
            "{text}"
        );
        // Every check column is present even without a result.
        for col in all_columns() {
            assert!(text.lines().next().unwrap().contains(&col));
        }
        assert!(text.contains("debian-6.1 / netprobe: no result"));
        let (md, _) = render(&[row], Style::Markdown);
        assert!(md.contains("**FAIL [1]**"), "{md}");
    }
}
