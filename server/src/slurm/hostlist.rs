//! Slurm hostlist expressions (`gpu[01-03,07],cpu5`) expanded to names.
//!
//! The grammar is the one Slurm's own `hostlist_create()` accepts
//! (`src/common/hostlist.h` and `hostlist.c` in the Slurm source; the
//! prolog guide points at `scontrol show hostnames` for the same
//! conversion):
//!
//! ```text
//! list   := token { sep token }      sep: ',' ' ' or tab, outside brackets;
//!                                     empty tokens are skipped
//! token  := { text | '[' ranges ']' }
//! ranges := range { ',' range }
//! range  := digits [ '-' digits ]     lo <= hi
//! ```
//!
//! * A range's width is the number of digits of its low end: leading
//!   zeros fix the width (`[08-10]` gives `08 09 10`; `[8-10]` gives
//!   `8 9 10`), as Slurm prints each number with `%0*lu` of that width.
//! * Several bracket groups in one token (`r[1-2]n[01-02]`) expand in
//!   Slurm's order (its recursive prefix expansion): with two groups the
//!   left one varies slowest (`r1n01 r1n02 r2n01 r2n02`); in general the
//!   last group varies fastest, then the first, the second, ... (see
//!   `generate`).
//! * Text after the last group (`gpu[1-2]-ib`) is kept as a suffix. Slurm
//!   22.05 refuses it ("Invalid hostlist"), so no list it writes has one;
//!   accepting it changes nothing for the lists it does write.
//! * Names come out in the order written; duplicates are kept (Slurm's
//!   `hostlist_create` keeps them too); the caller decides.
//!
//! Every expansion in the tests that Slurm also accepts was checked
//! against `scontrol show hostnames` of Slurm 22.05.8 (Debian bookworm),
//! and matches it name for name and in order.
//!
//! Stricter than Slurm on purpose, since the input comes from the
//! environment of a privileged program: an unmatched `[` or `]`, an empty
//! group, a descending range, a sign, or a character outside printable
//! ASCII is an error (Slurm would sometimes take the text as a literal
//! host name), and the input ([`MAX_INPUT`] bytes), the expansion
//! ([`MAX_NAMES`] names, checked before anything is generated) and each
//! name ([`MAX_NAME`] bytes) are bounded.

use thiserror::Error;

/// Longest expression accepted, bytes.
pub const MAX_INPUT: usize = 64 * 1024;
/// Most names an expression may expand to (Slurm's own bound on a
/// bracketed prefix, `MAX_PREFIX_CNT`, is the same 64 Ki).
pub const MAX_NAMES: usize = 65_536;
/// Longest name, bytes (a DNS name's limit).
pub const MAX_NAME: usize = 255;
/// Most digits in one number of a range.
const MAX_DIGITS: usize = 18;

/// Why an expression was refused; every message says where.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HostlistError {
    #[error("{len} bytes, over the {MAX_INPUT}-byte limit")]
    TooLong { len: usize },
    #[error("no host name in it")]
    Empty,
    #[error("expands to more than {MAX_NAMES} names")]
    TooMany,
    #[error("a name would be longer than {MAX_NAME} bytes (in `{token}`)")]
    NameTooLong { token: String },
    #[error("character {ch:?} at byte {at} is not allowed (printable ASCII only)")]
    BadChar { ch: char, at: usize },
    #[error("unmatched `{ch}` at byte {at}")]
    Unmatched { ch: char, at: usize },
    #[error("bad range `{range}` in `{token}`: {why}")]
    BadRange {
        range: String,
        token: String,
        why: &'static str,
    },
}

/// One part of a token: literal text, or a bracket group's numbers
/// (already formatted with their width).
#[derive(Debug)]
enum Part<'a> {
    Text(&'a str),
    Group(Vec<Range>),
}

#[derive(Debug, Clone, Copy)]
struct Range {
    lo: u64,
    hi: u64,
    width: usize,
}

impl Range {
    fn count(&self) -> u64 {
        self.hi - self.lo + 1
    }
}

/// Expand a Slurm hostlist expression into host names, in order.
pub fn expand(input: &str) -> Result<Vec<String>, HostlistError> {
    if input.len() > MAX_INPUT {
        return Err(HostlistError::TooLong { len: input.len() });
    }
    if let Some((at, ch)) = input
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_graphic() || c == ' ' || c == '\t'))
    {
        return Err(HostlistError::BadChar { ch, at });
    }
    let tokens = split(input)?;
    // Count first: nothing is generated for an expression over the bound.
    let mut parsed = Vec::with_capacity(tokens.len());
    let mut total: u64 = 0;
    for (start, token) in tokens {
        let parts = parse_token(token, start)?;
        let mut n: u64 = 1;
        let mut longest = 0usize;
        for p in &parts {
            match p {
                Part::Text(t) => longest += t.len(),
                Part::Group(rs) => {
                    let c = rs
                        .iter()
                        .try_fold(0u64, |acc, r| acc.checked_add(r.count()))
                        .ok_or(HostlistError::TooMany)?;
                    n = n.checked_mul(c).ok_or(HostlistError::TooMany)?;
                    longest += rs
                        .iter()
                        .map(|r| r.width.max(digits(r.hi)))
                        .max()
                        .unwrap_or(0);
                }
            }
            if n > MAX_NAMES as u64 {
                return Err(HostlistError::TooMany);
            }
        }
        if longest > MAX_NAME {
            return Err(HostlistError::NameTooLong {
                token: excerpt(token),
            });
        }
        total = total.saturating_add(n);
        if total > MAX_NAMES as u64 {
            return Err(HostlistError::TooMany);
        }
        parsed.push(parts);
    }
    if total == 0 {
        return Err(HostlistError::Empty);
    }
    let mut out = Vec::with_capacity(total as usize);
    for parts in &parsed {
        generate(parts, &mut out);
    }
    Ok(out)
}

/// Tokens (with their byte offsets) separated by `,`, space or tab
/// outside brackets; brackets must pair up and not nest.
fn split(input: &str) -> Result<Vec<(usize, &str)>, HostlistError> {
    let mut tokens = Vec::new();
    let mut open: Option<usize> = None;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '[' if open.is_some() => return Err(HostlistError::Unmatched { ch: '[', at: i }),
            '[' => open = Some(i),
            ']' if open.is_none() => return Err(HostlistError::Unmatched { ch: ']', at: i }),
            ']' => open = None,
            ',' | ' ' | '\t' if open.is_none() => {
                if i > start {
                    tokens.push((start, &input[start..i]));
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    if let Some(at) = open {
        return Err(HostlistError::Unmatched { ch: '[', at });
    }
    if input.len() > start {
        tokens.push((start, &input[start..]));
    }
    Ok(tokens)
}

/// A token's literal parts and bracket groups (brackets known to pair).
fn parse_token(token: &str, offset: usize) -> Result<Vec<Part<'_>>, HostlistError> {
    let mut parts = Vec::new();
    let mut rest = token;
    let mut at = offset;
    while let Some(open) = rest.find('[') {
        if open > 0 {
            parts.push(Part::Text(&rest[..open]));
        }
        let close = rest[open..]
            .find(']')
            .map(|c| open + c)
            .ok_or(HostlistError::Unmatched {
                ch: '[',
                at: at + open,
            })?;
        let body = &rest[open + 1..close];
        let mut ranges = Vec::new();
        for r in body.split(',') {
            ranges.push(parse_range(r, token)?);
        }
        parts.push(Part::Group(ranges));
        rest = &rest[close + 1..];
        at += close + 1;
    }
    if !rest.is_empty() {
        parts.push(Part::Text(rest));
    }
    Ok(parts)
}

fn parse_range(r: &str, token: &str) -> Result<Range, HostlistError> {
    let bad = |why| HostlistError::BadRange {
        range: excerpt(r),
        token: excerpt(token),
        why,
    };
    let (lo_s, hi_s) = match r.split_once('-') {
        Some((l, h)) => (l, h),
        None => (r, r),
    };
    let number = |s: &str| -> Result<u64, HostlistError> {
        if s.is_empty() {
            return Err(bad("a number is missing"));
        }
        if !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("only digits and one `-` may appear in a range"));
        }
        if s.len() > MAX_DIGITS {
            return Err(bad("a number has too many digits"));
        }
        s.parse().map_err(|_| bad("not a number"))
    };
    let lo = number(lo_s)?;
    let hi = number(hi_s)?;
    if lo > hi {
        return Err(bad("the low end is above the high end"));
    }
    Ok(Range {
        lo,
        hi,
        width: lo_s.len(),
    })
}

/// Push every name of `parts` to `out`, in Slurm's order. Slurm expands
/// the last group of a token as its range list and every earlier one as
/// part of the prefix, recursively from the right (`_push_range_list`),
/// so the loops are, outermost first: group k-1, k-2, ..., 1, then group
/// k innermost. With two groups that is "leftmost slowest"; with three,
/// `a[1-2]b[3-4]c[5-6]` gives `a1b3c5 a1b3c6 a2b3c5 a2b3c6 a1b4c5 ...`.
fn generate(parts: &[Part<'_>], out: &mut Vec<String>) {
    let groups: Vec<Vec<String>> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Group(ranges) => Some(
                ranges
                    .iter()
                    .flat_map(|r| (r.lo..=r.hi).map(move |n| format!("{n:0w$}", w = r.width)))
                    .collect(),
            ),
            Part::Text(_) => None,
        })
        .collect();
    let k = groups.len();
    // Innermost last.
    let order: Vec<usize> = match k {
        0 => Vec::new(),
        _ => (0..k - 1).rev().chain([k - 1]).collect(),
    };
    let mut pick = vec![0usize; k];
    loop {
        let mut name = String::new();
        let mut g = 0;
        for p in parts {
            match p {
                Part::Text(t) => name.push_str(t),
                Part::Group(_) => {
                    name.push_str(&groups[g][pick[g]]);
                    g += 1;
                }
            }
        }
        out.push(name);
        // The next combination, like an odometer; done when it wraps.
        let mut advanced = false;
        for &gi in order.iter().rev() {
            pick[gi] += 1;
            if pick[gi] < groups[gi].len() {
                advanced = true;
                break;
            }
            pick[gi] = 0;
        }
        if !advanced {
            return;
        }
    }
}

fn digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// At most 64 characters of `s`, for an error message.
fn excerpt(s: &str) -> String {
    if s.len() <= 64 {
        s.to_string()
    } else {
        // Printable ASCII only (checked first), so any byte is a boundary.
        format!("{}...", &s[..61])
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    fn ex(s: &str) -> Vec<String> {
        expand(s).unwrap()
    }

    #[test]
    fn plain_names_and_separators() {
        assert_eq!(ex("srv1"), ["srv1"]);
        assert_eq!(ex("a,b c\td"), ["a", "b", "c", "d"]);
        // Empty tokens are skipped, as Slurm's tokenizer does.
        assert_eq!(ex(",a,,b,"), ["a", "b"]);
        assert_eq!(ex("node-1.x_y"), ["node-1.x_y"]);
    }

    #[test]
    fn ranges_keep_zero_padding() {
        assert_eq!(
            ex("gpu[01-03,07],cpu5"),
            ["gpu01", "gpu02", "gpu03", "gpu07", "cpu5"]
        );
        assert_eq!(ex("n[08-10]"), ["n08", "n09", "n10"]);
        assert_eq!(ex("n[8-10]"), ["n8", "n9", "n10"]);
        assert_eq!(ex("n[098-101]"), ["n098", "n099", "n100", "n101"]);
        assert_eq!(ex("n[5]"), ["n5"]);
        assert_eq!(ex("[1-2]"), ["1", "2"]);
    }

    #[test]
    fn text_after_the_last_group_is_a_suffix() {
        // Slurm 22.05 refuses these; kept as suffixes here.
        assert_eq!(ex("gpu[1-2]-ib"), ["gpu1-ib", "gpu2-ib"]);
        assert_eq!(ex("r[1-2]n"), ["r1n", "r2n"]);
        assert_eq!(ex("a[1-2]b[3]-x"), ["a1b3-x", "a2b3-x"]);
    }

    /// Outputs of `scontrol show hostnames EXPR`, Slurm 22.05.8.
    #[test]
    fn slurm_22_05_expands_these_the_same() {
        let split = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        for (expr, slurm) in [
            ("gpu[01-03,07],cpu5", "gpu01 gpu02 gpu03 gpu07 cpu5"),
            ("r[1-2]n[01-02]", "r1n01 r1n02 r2n01 r2n02"),
            ("n[8-10]", "n8 n9 n10"),
            ("n[098-101]", "n098 n099 n100 n101"),
            ("n[1-010]", "n1 n2 n3 n4 n5 n6 n7 n8 n9 n10"),
            ("n[01,2,003-004]", "n01 n2 n003 n004"),
            ("n[00-01]", "n00 n01"),
            ("n[1-2][3-4]", "n13 n14 n23 n24"),
            ("a\tb c", "a b c"),
            ("a b,,c", "a b c"),
            ("b,a,b", "b a b"),
            ("n[1-2],n[1-2]", "n1 n2 n1 n2"),
            ("a[1,3]b[7],c", "a1b7 a3b7 c"),
            ("[1-2]", "1 2"),
            (
                "a[1-2]b[3-4]c[5-6]",
                "a1b3c5 a1b3c6 a2b3c5 a2b3c6 a1b4c5 a1b4c6 a2b4c5 a2b4c6",
            ),
            (
                "a[1-2]b[3-4]c[5-6]d[7-8]",
                "a1b3c5d7 a1b3c5d8 a2b3c5d7 a2b3c5d8 a1b4c5d7 a1b4c5d8 a2b4c5d7 a2b4c5d8 \
                 a1b3c6d7 a1b3c6d8 a2b3c6d7 a2b3c6d8 a1b4c6d7 a1b4c6d8 a2b4c6d7 a2b4c6d8",
            ),
        ] {
            assert_eq!(ex(expr), split(slurm), "{expr:?}");
        }
        // Slurm refuses these too ("Invalid hostlist").
        for expr in ["n[3-1]", "n[]", "x[0-99999999]", "n[0-65536]"] {
            assert!(expand(expr).is_err(), "{expr}");
        }
        assert_eq!(ex("n[0-65535]").len(), 65_536);
    }

    #[test]
    fn duplicates_and_order_are_kept() {
        assert_eq!(ex("b,a,b"), ["b", "a", "b"]);
    }

    #[test]
    fn hostile_input_is_refused_clearly() {
        let cases: &[(&str, &str)] = &[
            ("", "no host name"),
            (" , ", "no host name"),
            ("n[1-2", "unmatched `[` at byte 1"),
            ("n1-2]", "unmatched `]` at byte 4"),
            ("n[[1]]", "unmatched `[`"),
            ("n[]", "a number is missing"),
            ("n[3-1]", "low end is above"),
            ("n[-1]", "a number is missing"),
            ("n[1--2]", "only digits"),
            ("n[a-b]", "only digits"),
            ("n[1-2,]", "a number is missing"),
            ("n[1-9999999999999999999]", "too many digits"),
            ("n[0-65536]", "more than 65536"),
            ("a[0-999]b[0-999]", "more than 65536"),
            (
                "a[0-999999999999999]b[0-999999999999999]c[0-9]",
                "more than 65536",
            ),
            ("n\n1", "character '\\n' at byte 1"),
            ("n\u{e9}", "printable ASCII"),
        ];
        for (input, want) in cases {
            let e = expand(input).unwrap_err().to_string();
            assert!(e.contains(want), "{input:?}: {e}");
        }
        let long = "a".repeat(MAX_INPUT + 1);
        assert!(matches!(expand(&long), Err(HostlistError::TooLong { .. })));
        let name = format!("{}[1-2]", "a".repeat(300));
        assert!(matches!(
            expand(&name),
            Err(HostlistError::NameTooLong { .. })
        ));
        // Many tokens adding up past the bound, each small.
        let many = vec!["n[0-999]"; 66].join(",");
        assert_eq!(expand(&many), Err(HostlistError::TooMany));
        // Exactly at the bound is fine.
        assert_eq!(expand("n[1-65536]").unwrap().len(), MAX_NAMES);
    }

    /// A name list and an expression for it, built independently: groups
    /// of (prefix, ranges with a width, suffix).
    fn spec() -> impl Strategy<Value = (String, Vec<String>)> {
        let range = (0u64..2000, 0u64..20, 1usize..5).prop_map(|(lo, len, w)| (lo, lo + len, w));
        let group = (
            "[a-z][a-z0-9_.-]{0,6}",
            proptest::collection::vec(range, 1..4),
            proptest::option::of("-[a-z]{1,3}"),
            proptest::option::of(proptest::collection::vec(0u64..30, 1..3)),
        );
        proptest::collection::vec(group, 1..5).prop_map(|groups| {
            let mut exprs = Vec::new();
            let mut names = Vec::new();
            for (prefix, ranges, suffix, second) in groups {
                let suffix = suffix.unwrap_or_default();
                let inner: Vec<String> = ranges
                    .iter()
                    .map(|&(lo, hi, w)| {
                        if lo == hi {
                            format!("{lo:0w$}")
                        } else {
                            format!("{lo:0w$}-{hi}")
                        }
                    })
                    .collect();
                let mut expr = format!("{prefix}[{}]{suffix}", inner.join(","));
                let tails: Vec<String> = match &second {
                    Some(ns) => {
                        let list: Vec<String> = ns.iter().map(u64::to_string).collect();
                        expr.push_str(&format!("x[{}]", list.join(",")));
                        ns.iter().map(|n| format!("x{n}")).collect()
                    }
                    None => vec![String::new()],
                };
                for &(lo, hi, w) in &ranges {
                    for n in lo..=hi {
                        for t in &tails {
                            names.push(format!("{prefix}{n:0w$}{suffix}{t}"));
                        }
                    }
                }
                exprs.push(expr);
            }
            (exprs.join(","), names)
        })
    }

    proptest! {
        #[test]
        fn expression_round_trips((expr, names) in spec()) {
            prop_assert_eq!(expand(&expr).unwrap(), names);
        }

        #[test]
        fn listing_names_expands_to_themselves(
            names in proptest::collection::vec("[a-z][a-z0-9_.-]{0,10}", 1..20)
        ) {
            prop_assert_eq!(expand(&names.join(",")).unwrap(), names);
        }

        #[test]
        fn any_input_is_an_answer_never_a_panic(s in "[\\[\\]a-z0-9,\\- ]{0,40}") {
            let _ = expand(&s);
        }
    }
}
