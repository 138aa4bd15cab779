//! Where a problem is in the file: a dotted key (`bots[1].id`) turned back into a line number.
//!
//! serde and [`validate`](super::validate) speak in keys, but a user fixes a file by line. The
//! locator reads the TOML text line by line instead of keeping spans through deserialization:
//! it only has to find table headers and `key =` lines, and it works for problems about keys
//! that are *missing* (a required key left out points at its table's header).

use std::collections::HashMap;

/// The 1-based line of a dotted key such as `bots[1].id` or `gateway.listen` in `text`.
///
/// Finds the table the key lives in (`[gateway]`, or the second `[[bots]]` header for
/// `bots[1]`), then the key's line inside that table. A key that is missing from its table
/// (a required key left out) gets the table's header line. `None` when neither is found.
pub(super) fn locate(text: &str, key: &str) -> Option<usize> {
    let mut arrays: HashMap<String, usize> = HashMap::new();
    // (canonical table path such as `bots[1]`, 1-based header line); the root table first.
    let mut tables: Vec<(String, usize)> = vec![(String::new(), 0)];
    let lines: Vec<&str> = text.lines().collect();
    for (n, line) in lines.iter().enumerate() {
        let t = line.trim();
        let (name, array) = if let Some(inner) = t.strip_prefix("[[") {
            match inner.split_once("]]") {
                Some((name, _)) => (name, true),
                None => continue,
            }
        } else if let Some(inner) = t.strip_prefix('[') {
            match inner.split_once(']') {
                Some((name, _)) => (name, false),
                None => continue,
            }
        } else {
            continue;
        };
        let mut plain = String::with_capacity(name.len());
        let mut canonical = String::with_capacity(name.len() + 4);
        let segments: Vec<&str> = name
            .split('.')
            .map(|s| s.trim().trim_matches('"'))
            .collect();
        for (s, segment) in segments.iter().enumerate() {
            if s > 0 {
                plain.push('.');
                canonical.push('.');
            }
            plain.push_str(segment);
            canonical.push_str(segment);
            if array && s + 1 == segments.len() {
                *arrays.entry(plain.clone()).or_insert(0) += 1;
                // A new element starts its own nested arrays: `[[bots.cron]]` after the
                // second `[[bots]]` is `bots[1].cron[0]`.
                let nested = format!("{plain}.");
                arrays.retain(|path, _| !path.starts_with(&nested));
            }
            if let Some(count) = arrays.get(&plain) {
                canonical.push_str(&format!("[{}]", count - 1));
            }
        }
        tables.push((canonical, n + 1));
    }
    // The longest table path that prefixes the key.
    let (t, (table, header)) = tables
        .iter()
        .enumerate()
        .filter(|(_, (path, _))| {
            path.is_empty()
                || key == path
                || key
                    .strip_prefix(path.as_str())
                    .is_some_and(|rest| rest.starts_with('.'))
        })
        .max_by_key(|(_, (path, _))| path.len())?;
    let rest = key[table.len()..].trim_start_matches('.');
    let leaf = rest
        .split(['.', '['])
        .next()
        .filter(|leaf| !leaf.is_empty());
    let end = tables.get(t + 1).map_or(lines.len(), |(_, h)| h - 1);
    let found = leaf.and_then(|leaf| {
        (*header..end).find(|&n| {
            let line = lines[n].trim_start();
            let line = line
                .strip_prefix('"')
                .and_then(|l| l.strip_prefix(leaf))
                .and_then(|l| l.strip_prefix('"'))
                .or_else(|| line.strip_prefix(leaf));
            line.is_some_and(|l| {
                let l = l.trim_start();
                l.starts_with('=') || l.starts_with('.')
            })
        })
    });
    match found {
        Some(n) => Some(n + 1),
        None if table.is_empty() => None,
        None => Some(*header),
    }
}

/// The 1-based line of a byte offset (a parse error's span).
pub(super) fn line_at(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_finds_the_nth_table_and_the_key_in_it() {
        let text = "[gateway]\nlisten = \"x\"\n\n[[bots]]\nid = \"a\"\n\n[[bots]]\nname = \"B\"\nid = \"b\"\n\n[[accounts]]\nbot = \"a\"\n[chains]\nrounds = 0\n";
        assert_eq!(locate(text, "gateway.listen"), Some(2));
        assert_eq!(locate(text, "bots[0].id"), Some(5));
        assert_eq!(locate(text, "bots[1].id"), Some(9));
        assert_eq!(
            locate(text, "bots[1].tools[2]"),
            Some(7),
            "missing key: header line"
        );
        assert_eq!(locate(text, "accounts[0].bot"), Some(12));
        assert_eq!(locate(text, "accounts[0].bot_token_env"), Some(11));
        assert_eq!(locate(text, "chains.rounds"), Some(14));
        assert_eq!(locate(text, "lanes.main"), None);
    }

    #[test]
    fn nested_arrays_count_per_parent_element() {
        let text = "[[bots]]\nid = \"a\"\n[[bots.cron]]\nchat = \"x\"\n\n[[bots]]\nid = \"b\"\n[[bots.cron]]\nchat = \"y\"\n[[bots.cron]]\nchat = \"z\"\n";
        assert_eq!(locate(text, "bots[0].cron[0].chat"), Some(4));
        assert_eq!(locate(text, "bots[1].cron[0].chat"), Some(9));
        assert_eq!(locate(text, "bots[1].cron[1].chat"), Some(11));
        assert_eq!(locate(text, "bots[1].id"), Some(7));
    }
}
