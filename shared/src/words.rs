//! Count sentences: every "N things" a message prints goes through
//! [`count`] (or [`count_of`] for an irregular plural), so one thing is
//! never "1 things" (newcomer 4, P14: `linked 1 hook commands`).

/// `n` and `noun`, the noun in the plural unless `n` is 1: `1 hook
/// command`, `31 hook commands`. `noun` is the singular of a noun whose
/// plural adds `s` (`count(2, "session")`); [`count_of`] takes any other.
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

/// `n` and `one` or `many`, as `n` is 1 or not: `count_of(2, "entry",
/// "entries")`.
pub fn count_of(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `one` or `many` alone, for a sentence that names the count elsewhere
/// (`the 1 note … it is`): `noun_for(n, "it is", "they are")`.
pub fn noun_for<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(count(1, "hook command"), "1 hook command");
        assert_eq!(count(0, "hook command"), "0 hook commands");
        assert_eq!(count(31, "hook command"), "31 hook commands");
        assert_eq!(count_of(1, "entry", "entries"), "1 entry");
        assert_eq!(count_of(2, "entry", "entries"), "2 entries");
        assert_eq!(noun_for(1, "it is", "they are"), "it is");
        assert_eq!(noun_for(3, "it is", "they are"), "they are");
    }
}
