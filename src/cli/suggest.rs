//! "Did you mean": the known names closest to one that was mistyped, so an error can offer them
//! instead of an empty result.

/// At most this many suggestions.
const MAX: usize = 3;

/// The entries of `known` nearest to `wanted`: those it is a prefix of (or that are a prefix of
/// it) first, then by edit distance, keeping only those within a quarter of `wanted`'s length
/// (at least 2 edits).
pub(super) fn nearest<'a>(wanted: &str, known: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let budget = (wanted.chars().count() / 4).max(2);
    let mut scored: Vec<(usize, &str)> = known
        .into_iter()
        .filter_map(|candidate| {
            let score = if candidate.starts_with(wanted) || wanted.starts_with(candidate) {
                0
            } else {
                distance(wanted, candidate)
            };
            (score <= budget).then_some((score, candidate))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(MAX).map(|(_, c)| c).collect()
}

/// Levenshtein distance over characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if ca == *cb {
                diagonal
            } else {
                1 + diagonal.min(above).min(row[j])
            };
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_counts_edits() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("same", "same"), 0);
    }

    #[test]
    fn nearest_prefers_prefixes_then_few_edits() {
        let known = [
            "bot:snark:local:snark:lobby",
            "bot:caid:local:caid:lobby",
            "bot:snark:local:snark:dm:alice",
        ];
        assert_eq!(
            nearest("bot:snark:local:snark:loby", known),
            vec!["bot:snark:local:snark:lobby"]
        );
        assert_eq!(
            nearest("bot:snark", known),
            vec![
                "bot:snark:local:snark:dm:alice",
                "bot:snark:local:snark:lobby"
            ]
        );
        assert!(nearest("something else entirely", known).is_empty());
    }
}
