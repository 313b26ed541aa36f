//! Port-name ranges: `100GE1/0/[1-16]` stands for sixteen ports.
//!
//! An item is checked before it is expanded: a range whose names would
//! be longer than a port name may be ([`MAX_PORT_NAME`]) is refused, so a
//! small file cannot expand into gigabytes of names (65 536 names of a
//! 30 000-character prefix, or of a 20 000-digit zero padding), and
//! messages quote at most [`SHOWN`] characters of an item.

use crate::names::MAX_PORT_NAME;

/// Characters of an item quoted in a message.
const SHOWN: usize = 80;

/// `item` for a message: quoted, escaped, cut at [`SHOWN`] characters.
fn shown(item: &str) -> String {
    match item.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{:?}… ({} characters)", &item[..cut], item.chars().count()),
        None => format!("{item:?}"),
    }
}

/// Expand one port item. A single `[a-b]` group expands to `b - a + 1` names
/// (zero padding of `a` is kept); anything else is one literal name.
pub fn expand_ports(item: &str) -> Result<Vec<String>, String> {
    let item_q = shown(item);
    let Some(open) = item.find('[') else {
        if item.contains(']') {
            return Err(format!("unbalanced ']' in port range {item_q}"));
        }
        return Ok(vec![item.to_string()]);
    };
    let close = item[open..]
        .find(']')
        .map(|c| open + c)
        .ok_or_else(|| format!("unclosed '[' in port range {item_q}"))?;
    let (prefix, inner, suffix) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
    if suffix.contains('[') || suffix.contains(']') || prefix.contains(']') {
        return Err(format!("only one [a-b] group is allowed in {item_q}"));
    }
    let (a, b) = inner
        .split_once('-')
        .ok_or_else(|| format!("range {item_q} must look like [first-last]"))?;
    let parse = |s: &str| {
        s.parse::<u32>()
            .map_err(|_| format!("range bound {} in {item_q} is not a number", shown(s)))
    };
    let (start, end) = (parse(a)?, parse(b)?);
    if start > end {
        return Err(format!("range {item_q} runs backwards"));
    }
    if end - start >= 65_536 {
        return Err(format!("range {item_q} has more than 65536 ports"));
    }
    let width = if a.len() > 1 && a.starts_with('0') {
        a.len()
    } else {
        0
    };
    let digits = width.max(end.to_string().len());
    let longest = prefix.chars().count() + digits + suffix.chars().count();
    if longest > MAX_PORT_NAME {
        return Err(format!(
            "range {item_q} makes port names of {longest} characters, longer than \
             {MAX_PORT_NAME}"
        ));
    }
    Ok((start..=end)
        .map(|n| format!("{prefix}{n:0width$}{suffix}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::expand_ports;

    #[test]
    fn ranges_expand() {
        assert_eq!(
            expand_ports("100GE1/0/[1-3]").unwrap(),
            ["100GE1/0/1", "100GE1/0/2", "100GE1/0/3"]
        );
        assert_eq!(expand_ports("[1-2]").unwrap(), ["1", "2"]);
        assert_eq!(
            expand_ports("Eth[08-10]/1").unwrap(),
            ["Eth08/1", "Eth09/1", "Eth10/1"]
        );
        assert_eq!(expand_ports("Ethernet0").unwrap(), ["Ethernet0"]);
    }

    #[test]
    fn ranges_of_names_too_long_are_refused_before_expanding() {
        let long = format!("{}[1-65535]", "A".repeat(30_000));
        let e = expand_ports(&long).unwrap_err();
        assert!(
            e.contains("names of 30005 characters, longer than 64"),
            "{e}"
        );
        assert!(e.len() < 300, "the message quotes the item cut short: {e}");
        let padded = format!("[{}1-65535]", "0".repeat(20_000));
        let e = expand_ports(&padded).unwrap_err();
        assert!(e.contains("20001 characters"), "{e}");
        // At the limit a range still expands.
        let edge = format!("{}[1-9]", "A".repeat(63));
        assert_eq!(expand_ports(&edge).unwrap().len(), 9);
        let over = format!("{}[1-10]", "A".repeat(63));
        assert!(expand_ports(&over).is_err());
    }

    #[test]
    fn bad_ranges_are_errors() {
        for bad in [
            "a[1-",
            "a[3-1]",
            "a[x-2]",
            "a[1-2][3-4]",
            "a]",
            "a[1]",
            "a[0-99999999]",
        ] {
            assert!(expand_ports(bad).is_err(), "{bad}");
        }
    }
}
