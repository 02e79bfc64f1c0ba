//! Parsers of command-line values shared by the commands (clap `value_parser`s).

use std::time::Duration;

/// Parses a share of one CPU given as a percentage, `1%` or `1` (both 0.01), `0.5%`; more than
/// 100% is several CPUs' worth (a target with many threads).
pub fn parse_cpu_percent(s: &str) -> std::result::Result<f64, String> {
    let t = s.trim();
    let num = t.strip_suffix('%').unwrap_or(t).trim();
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a percentage of a CPU (e.g. 1%, 0.5%)"))?;
    if !(v.is_finite() && v > 0.0 && v <= 100_000.0) {
        return Err(format!(
            "'{s}' must be above 0% (and at most 100000%: a thousand CPUs)"
        ));
    }
    Ok(v / 100.0)
}

/// Parses durations like `10s`, `500ms`, `2m`, `1.5s`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (e.g. 10s, 500ms, 2m)"))?;
    let secs = match unit {
        "ms" => v / 1e3,
        "s" => v,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(format!("unknown unit '{unit}' in '{s}' (use ms, s, m, h)")),
    };
    if !(secs.is_finite() && secs > 0.0) {
        return Err(format!("'{s}' must be positive"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_percentages_parse_with_or_without_the_sign() {
        assert_eq!(parse_cpu_percent("1%"), Ok(0.01));
        assert_eq!(parse_cpu_percent(" 50 "), Ok(0.5));
        assert_eq!(parse_cpu_percent("0.5%"), Ok(0.005));
        for bad in ["0", "-1%", "abc", "nan", "1e9", "%"] {
            assert!(parse_cpu_percent(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("x").is_err());
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("5y").is_err());
    }
}
