//! TL1 input parsing: `VERB-MOD:[TID]:[AID]:CTAG[:...]` and port lists.
//!
//! Pure functions over text, so the grammar is tested without sockets.
//! The text reaching here is one command with its `;` already removed.

/// A syntactically valid TL1 command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Upper-cased verb and modifiers, e.g. `ENT-PATCH`.
    pub verb: String,
    pub tid: String,
    pub aid: String,
    pub ctag: String,
    /// Fields after the ctag (general block, parameters), as sent.
    pub rest: Vec<String>,
}

/// A command that could not be parsed: the code and explanation to DENY
/// with, and the ctag if one could be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub ctag: Option<String>,
    pub code: &'static str,
    pub text: String,
}

/// Longest ctag accepted (GR-831 says 6; clients use more in practice).
const MAX_CTAG: usize = 16;

fn is_verb(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 32
        && s.split('-')
            .all(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphabetic()))
}

/// Split a command into its fields and check verb and ctag.
pub fn parse(text: &str) -> Result<Command, ParseError> {
    let text = text.trim();
    let fields: Vec<&str> = text.split(':').map(str::trim).collect();
    let ctag = fields
        .get(3)
        .filter(|c| {
            !c.is_empty() && c.len() <= MAX_CTAG && c.chars().all(|ch| ch.is_ascii_alphanumeric())
        })
        .map(|c| c.to_string());
    let verb = fields.first().copied().unwrap_or("");
    if !is_verb(verb) {
        return Err(ParseError {
            ctag,
            code: "ICNV",
            text: "command not recognised".into(),
        });
    }
    if fields.len() < 4 {
        return Err(ParseError {
            ctag: None,
            code: "IISP",
            text: "expected VERB:TID:AID:CTAG".into(),
        });
    }
    let Some(ctag) = ctag else {
        return Err(ParseError {
            ctag: None,
            code: "IICT",
            text: format!("ctag must be 1-{MAX_CTAG} letters or digits"),
        });
    };
    Ok(Command {
        verb: verb.to_ascii_uppercase(),
        tid: fields[1].to_string(),
        aid: fields[2].to_string(),
        ctag,
        rest: fields[4..].iter().map(|s| s.to_string()).collect(),
    })
}

/// Most ports one list may name (a range cannot make the server allocate
/// without bound).
const MAX_LIST: usize = 4096;

/// Expand a port list: `3&7&9`, ranges `1&&64`, mixed `1&&4&9`. Numbers
/// only; the caller maps them to ports.
pub fn port_list(aid: &str) -> Result<Vec<u32>, String> {
    let aid = aid.trim();
    if aid.is_empty() {
        return Err("empty port list".into());
    }
    let num = |s: &str| -> Result<u32, String> {
        if !s.is_empty() && s.len() <= 9 && s.chars().all(|c| c.is_ascii_digit()) {
            s.parse::<u32>().map_err(|_| format!("bad port {s:?}"))
        } else {
            Err(format!(
                "bad port {:?}",
                s.chars().take(16).collect::<String>()
            ))
        }
    };
    let mut out = Vec::new();
    for item in aid
        .split('&')
        .collect::<Vec<_>>()
        .split(|s| s.is_empty())
        .enumerate()
    {
        // `a&&b` splits as [.., a] [b, ..]: the range joins the last of one
        // group to the first of the next.
        let (i, group) = item;
        if group.is_empty() {
            return Err("bad '&' in port list".into());
        }
        for (j, s) in group.iter().enumerate() {
            let n = num(s)?;
            if i > 0 && j == 0 {
                let from = out.last().copied().ok_or("range without a start")?;
                if n <= from {
                    return Err(format!("range {from}&&{n} is empty"));
                }
                if (n - from) as usize > MAX_LIST {
                    return Err("port list too long".into());
                }
                out.extend(from + 1..=n);
            } else {
                out.push(n);
            }
            if out.len() > MAX_LIST {
                return Err("port list too long".into());
            }
        }
    }
    Ok(out)
}

/// `key=value` parameters of a field, upper-cased keys (`PARAMETER=SIZE`).
pub fn params(field: &str) -> Vec<(String, String)> {
    field
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.trim().to_ascii_uppercase(), v.trim().to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn fields_and_ctag() {
        let c = parse("ent-patch::11,28:42").unwrap();
        assert_eq!(
            (c.verb.as_str(), c.aid.as_str(), c.ctag.as_str()),
            ("ENT-PATCH", "11,28", "42")
        );
        let c = parse("RTRV-EQPT::SYSTEM:7:::PARAMETER=SIZE").unwrap();
        assert_eq!(c.rest, vec!["", "", "PARAMETER=SIZE"]);
        assert_eq!(parse("RTRV-PATCH").unwrap_err().code, "IISP");
        assert_eq!(parse("RTRV-PATCH:::").unwrap_err().code, "IICT");
        assert_eq!(parse("RTRV-PATCH:::a b").unwrap_err().code, "IICT");
        let e = parse("\u{1}\u{fffd}::x:9").unwrap_err();
        assert_eq!((e.code, e.ctag.as_deref()), ("ICNV", Some("9")));
    }

    #[test]
    fn lists_and_ranges() {
        assert_eq!(port_list("3&7&9").unwrap(), vec![3, 7, 9]);
        assert_eq!(port_list("1&&4").unwrap(), vec![1, 2, 3, 4]);
        assert_eq!(port_list("1&&3&9&&10").unwrap(), vec![1, 2, 3, 9, 10]);
        assert_eq!(port_list("11").unwrap(), vec![11]);
        for bad in ["", "&1", "1&", "1&&&2", "4&&2", "x", "1&&99999999", "-1"] {
            assert!(port_list(bad).is_err(), "{bad:?} accepted");
        }
    }
}
