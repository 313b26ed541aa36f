//! Finding the line of a semantic problem in the YAML source.
//!
//! The YAML parser reports lines for syntax and type errors only; checks made
//! after deserialisation (a port used twice, a link to a missing device) find
//! their line here by looking for the entry's distinctive text. When the text
//! cannot be found (e.g. it came from a range) the problem has no line.

use std::collections::HashMap;

#[cfg(test)]
thread_local! {
    /// Searches of the whole file made on this thread (tests count them to
    /// prove validation makes at most one per kept problem).
    pub(crate) static SEARCHES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Count one search of the file (tests only).
fn searched() {
    #[cfg(test)]
    SEARCHES.with(|c| c.set(c.get() + 1));
}

pub(crate) struct Locator<'a> {
    lines: Vec<&'a str>,
    /// (top-level section, entry name) -> lines of its `name:` keys, in
    /// order (more than one when a name is declared twice).
    entries: HashMap<(&'a str, &'a str), Vec<usize>>,
}

impl<'a> Locator<'a> {
    /// Index the `name:` entries of every top-level section in one pass;
    /// everything else is searched only when a problem needs its line.
    pub fn new(text: &'a str) -> Self {
        let lines: Vec<&str> = text.lines().collect();
        let mut entries = HashMap::new();
        let mut section = "";
        for (i, raw) in lines.iter().enumerate() {
            let line = strip_comment(raw);
            if !raw.starts_with([' ', '\t', '-']) && !line.trim().is_empty() {
                section = line.split(':').next().unwrap_or("").trim();
            }
            if let Some(v) = key_value(line, "name") {
                entries
                    .entry((section, v))
                    .or_insert_with(Vec::new)
                    .push(i + 1);
            }
        }
        Locator { lines, entries }
    }

    /// Line (1-based) of the `name: <name>` entry of `section` (e.g. `leaves`).
    pub fn entry(&self, section: &str, name: &str) -> Option<usize> {
        self.entry_nth(section, name, 0)
    }

    /// Line of the `nth` (0-based) `name: <name>` entry of `section`.
    pub fn entry_nth(&self, section: &str, name: &str, nth: usize) -> Option<usize> {
        self.entries.get(&(section, name))?.get(nth).copied()
    }

    /// Line of the `nth` (0-based) occurrence of `token` as a whole YAML scalar.
    pub fn token(&self, token: &str, nth: usize) -> Option<usize> {
        searched();
        self.lines
            .iter()
            .enumerate()
            .filter(|(_, l)| contains_scalar(strip_comment(l), token))
            .nth(nth)
            .map(|(i, _)| i + 1)
    }

    /// Line of item `idx` (0-based) of the block list `key:` inside the entry
    /// starting at `entry` (a flow-style list gives the `key:` line itself).
    pub fn item(&self, entry: Option<usize>, key: &str, idx: usize) -> Option<usize> {
        searched();
        let start = entry?;
        let indent = |l: &str| l.len() - l.trim_start_matches([' ', '-']).len();
        let base = indent(self.lines.get(start - 1)?);
        let mut key_line = None;
        let mut seen = 0;
        for (i, raw) in self.lines.iter().enumerate().skip(start) {
            let line = strip_comment(raw);
            if line.trim().is_empty() {
                continue;
            }
            if indent(line) <= base && line.trim_start().starts_with('-') || indent(line) < base {
                break;
            }
            match key_line {
                None if key_value(line, key).is_some() => {
                    if !key_value(line, key).unwrap_or("").is_empty() {
                        return Some(i + 1);
                    }
                    key_line = Some(indent(line));
                }
                Some(k) if line.trim_start().starts_with('-') && indent(line) > k => {
                    if seen == idx {
                        return Some(i + 1);
                    }
                    seen += 1;
                }
                Some(k) if indent(line) <= k => break,
                _ => {}
            }
        }
        key_line.map(|_| start)
    }

    /// Line of the `key:` under the first occurrence of the top-level `section`.
    pub fn key(&self, key: &str) -> Option<usize> {
        searched();
        self.lines
            .iter()
            .position(|l| {
                l.trim_start()
                    .trim_start_matches("- ")
                    .starts_with(&format!("{key}:"))
            })
            .map(|i| i + 1)
    }
}

fn strip_comment(line: &str) -> &str {
    match line.find(" #") {
        Some(i) => &line[..i],
        None if line.trim_start().starts_with('#') => "",
        None => line,
    }
}

fn key_value<'l>(line: &'l str, key: &str) -> Option<&'l str> {
    let t = line.trim_start().trim_start_matches('-').trim_start();
    let t = t.trim_start_matches('{').trim_start();
    let rest = t.strip_prefix(key)?.trim_start().strip_prefix(':')?;
    let v = rest.split([',', '}']).next()?.trim();
    Some(v.trim_matches(['"', '\'']))
}

/// Whether `token` appears in `line` bounded by YAML punctuation or space.
fn contains_scalar(line: &str, token: &str) -> bool {
    let boundary = |c: Option<char>| {
        c.is_none_or(|c| {
            matches!(
                c,
                ' ' | ',' | '[' | ']' | '{' | '}' | '"' | '\'' | ':' | '-'
            )
        })
    };
    let mut from = 0;
    while let Some(pos) = line[from..].find(token) {
        let start = from + pos;
        let end = start + token.len();
        let before = line[..start].chars().next_back();
        let after = line[end..].chars().next();
        let after_ok = boundary(after)
            && !(after == Some(':') && line[end + 1..].starts_with(|c: char| !c.is_whitespace()));
        if boundary(before) && after_ok {
            return true;
        }
        from = start + token.len().max(1);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_entries_and_tokens() {
        let text = "leaves:\n  - name: leaf1\n    x: 1\nspines:\n  - name: leaf1\nlinks:\n  - [leaf1:p1, s:p2]\n  - [\"leaf1:p1\", s:p3]\n";
        let loc = Locator::new(text);
        assert_eq!(loc.entry("leaves", "leaf1"), Some(2));
        assert_eq!(loc.entry("spines", "leaf1"), Some(5));
        assert_eq!(loc.token("leaf1:p1", 0), Some(7));
        assert_eq!(loc.token("leaf1:p1", 1), Some(8));
        assert_eq!(loc.token("leaf1:p", 0), None);
        let ocs = "ocs:\n  - name: o1\n    patches:\n      - [\"1\", \"3\"]\n      - [\"2\", \"4\"]\n  - name: o2\n    patches: [[1, 2]]\n";
        let loc = Locator::new(ocs);
        assert_eq!(loc.item(loc.entry("ocs", "o1"), "patches", 1), Some(5));
        assert_eq!(loc.item(loc.entry("ocs", "o2"), "patches", 0), Some(7));
    }
}
