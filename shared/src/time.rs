//! UTC timestamps without a date library: parse the server's ISO-8601 forms
//! (naive, `Z`, `+00:00`, with or without microseconds) and render them the
//! way Python's `datetime.isoformat()` does.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub fn now() -> Timestamp {
        let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        Timestamp(d.as_micros() as i64)
    }

    pub fn from_secs(secs: i64) -> Timestamp {
        Timestamp(secs * 1_000_000)
    }

    pub fn add_secs(self, secs: i64) -> Timestamp {
        Timestamp(self.0 + secs * 1_000_000)
    }

    pub fn secs(self) -> i64 {
        self.0.div_euclid(1_000_000)
    }

    /// Parse `YYYY-MM-DDTHH:MM:SS[.ffffff][Z|+HH:MM|-HH:MM]`; a naive value is UTC.
    pub fn parse(s: &str) -> Option<Timestamp> {
        let s = s.trim();
        let b = s.as_bytes();
        if b.len() < 19
            || b[4] != b'-'
            || b[7] != b'-'
            || !(b[10] == b'T' || b[10] == b' ')
            || b[13] != b':'
            || b[16] != b':'
        {
            return None;
        }
        let num = |r: std::ops::Range<usize>| -> Option<i64> {
            let t = s.get(r)?;
            if t.bytes().all(|c| c.is_ascii_digit()) { t.parse().ok() } else { None }
        };
        let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
            return None;
        }
        let mut rest = &s[19..];
        let mut micros = 0i64;
        if let Some(r) = rest.strip_prefix('.') {
            let digits = r.bytes().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 {
                return None;
            }
            let frac = &r[..digits];
            let mut v: i64 = frac[..digits.min(6)].parse().ok()?;
            for _ in digits.min(6)..6 {
                v *= 10;
            }
            micros = v;
            rest = &r[digits..];
        }
        let offset_secs = match rest {
            "" | "Z" | "z" => 0,
            _ => {
                let sign = match rest.as_bytes()[0] {
                    b'+' => 1,
                    b'-' => -1,
                    _ => return None,
                };
                let o = &rest[1..];
                let (oh, om) = o.split_once(':').unwrap_or((o.get(..2)?, o.get(2..).unwrap_or("0")));
                let oh: i64 = oh.parse().ok()?;
                let om: i64 = if om.is_empty() { 0 } else { om.parse().ok()? };
                sign * (oh * 3600 + om * 60)
            }
        };
        let days = days_from_civil(y, mo, d);
        let secs = days * 86400 + h * 3600 + mi * 60 + se - offset_secs;
        Some(Timestamp(secs * 1_000_000 + micros))
    }

    fn parts(self) -> (i64, i64, i64, i64, i64, i64, i64) {
        let secs = self.0.div_euclid(1_000_000);
        let micros = self.0.rem_euclid(1_000_000);
        let days = secs.div_euclid(86400);
        let sod = secs.rem_euclid(86400);
        let (y, m, d) = civil_from_days(days);
        (y, m, d, sod / 3600, (sod % 3600) / 60, sod % 60, micros)
    }

    fn write_naive(self, out: &mut String) {
        let (y, m, d, h, mi, s, us) = self.parts();
        out.push_str(&format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}"));
        if us != 0 {
            out.push_str(&format!(".{us:06}"));
        }
    }

    /// Python `isoformat()` of an aware UTC datetime: `...+00:00`.
    pub fn to_iso_offset(self) -> String {
        let mut s = String::with_capacity(32);
        self.write_naive(&mut s);
        s.push_str("+00:00");
        s
    }

    /// The `Z` form the server uses for receipt timestamps.
    pub fn to_iso_z(self) -> String {
        let mut s = String::with_capacity(32);
        self.write_naive(&mut s);
        s.push('Z');
        s
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_iso_z())
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_iso_z())
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Timestamp::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("not an ISO-8601 timestamp: {s:?}")))
    }
}

/// Howard Hinnant's days_from_civil.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Parse a human duration: `90`, `90s`, `15m`, `2h`, `1d`.
pub fn parse_duration_secs(s: &str) -> Option<i64> {
    let s = s.trim();
    let (num, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let n: i64 = num.parse().ok()?;
    let mult = match unit {
        "s" | "sec" | "secs" => 1,
        "m" | "min" | "mins" => 60,
        "h" | "hr" | "hrs" => 3600,
        "d" | "day" | "days" => 86400,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_python_isoformat() {
        for (input, offset, z) in [
            ("2026-12-02T09:20:38.291972", "2026-12-02T09:20:38.291972+00:00", "2026-12-02T09:20:38.291972Z"),
            ("2026-12-03T09:20:38.279872Z", "2026-12-03T09:20:38.279872+00:00", "2026-12-03T09:20:38.279872Z"),
            ("2026-12-02T09:21:05+00:00", "2026-12-02T09:21:05+00:00", "2026-12-02T09:21:05Z"),
            ("2026-12-02T11:21:05.5+02:00", "2026-12-02T09:21:05.500000+00:00", "2026-12-02T09:21:05.500000Z"),
            ("2024-02-29T00:00:00", "2024-02-29T00:00:00+00:00", "2024-02-29T00:00:00Z"),
            ("1970-01-01T00:00:00", "1970-01-01T00:00:00+00:00", "1970-01-01T00:00:00Z"),
        ] {
            let t = Timestamp::parse(input).unwrap();
            assert_eq!(t.to_iso_offset(), offset, "{input}");
            assert_eq!(t.to_iso_z(), z, "{input}");
        }
        assert_eq!(Timestamp::parse("1970-01-01T00:00:01Z").unwrap(), Timestamp(1_000_000));
        assert!(Timestamp::parse("nope").is_none());
        assert!(Timestamp::parse("2026-13-02T09:20:38").is_none());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_secs("2h"), Some(7200));
        assert_eq!(parse_duration_secs("90"), Some(90));
        assert_eq!(parse_duration_secs("15m"), Some(900));
        assert_eq!(parse_duration_secs("x"), None);
    }
}
