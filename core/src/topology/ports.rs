//! Port-name ranges: `100GE1/0/[1-16]` stands for sixteen ports.

/// Expand one port item. A single `[a-b]` group expands to `b - a + 1` names
/// (zero padding of `a` is kept); anything else is one literal name.
pub fn expand_ports(item: &str) -> Result<Vec<String>, String> {
    let Some(open) = item.find('[') else {
        if item.contains(']') {
            return Err(format!("unbalanced ']' in port range {item:?}"));
        }
        return Ok(vec![item.to_string()]);
    };
    let close = item[open..]
        .find(']')
        .map(|c| open + c)
        .ok_or_else(|| format!("unclosed '[' in port range {item:?}"))?;
    let (prefix, inner, suffix) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
    if suffix.contains('[') || suffix.contains(']') || prefix.contains(']') {
        return Err(format!("only one [a-b] group is allowed in {item:?}"));
    }
    let (a, b) = inner
        .split_once('-')
        .ok_or_else(|| format!("range {item:?} must look like [first-last]"))?;
    let parse = |s: &str| {
        s.parse::<u32>()
            .map_err(|_| format!("range bound {s:?} in {item:?} is not a number"))
    };
    let (start, end) = (parse(a)?, parse(b)?);
    if start > end {
        return Err(format!("range {item:?} runs backwards"));
    }
    if end - start >= 65_536 {
        return Err(format!("range {item:?} has more than 65536 ports"));
    }
    let width = if a.len() > 1 && a.starts_with('0') {
        a.len()
    } else {
        0
    };
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
