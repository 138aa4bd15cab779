//! The first line of the text a bot is given for its turn in a chain (`[chain ch-1 "review
//! the plan"] ...`), written by `chains::context` and read back here, so a backend without a
//! model (`echo`) can answer a chain turn with its topic instead of repeating the instructions
//! around it. The format and its parser live together.

/// The header of a chain turn's text: the chain's id and its topic.
pub(crate) fn chain_header(id: &str, topic: &str) -> String {
    format!("[chain {id} \"{topic}\"]")
}

/// The topic of a chain turn's text, when `text` is one.
pub(crate) fn chain_topic(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("[chain ")?;
    let (_id, rest) = rest.split_once(" \"")?;
    let header = rest.lines().next()?;
    let end = header.rfind("\"]")?;
    Some(&header[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_topic_is_read_back_from_the_header() {
        let text = format!(
            "{} coordinator: baton; participants: caid.\nIt is your turn.",
            chain_header("ch-7", "the \"new\" plan")
        );
        assert_eq!(chain_topic(&text), Some("the \"new\" plan"));
        assert_eq!(chain_topic("review the plan"), None);
    }
}
