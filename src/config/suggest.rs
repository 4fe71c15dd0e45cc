//! Config room: "did you mean" suggestions for unknown keys and names.
//!
//! Owns the choice of the nearest valid name by edit distance (optimal string alignment, so a
//! swapped pair of letters costs one edit). Knows nothing of the schema: callers pass the valid
//! names.

/// The candidate nearest to `typed`, if it is close enough to be a plausible typo.
///
/// Close enough: at most one third of the longer name's length in edits (at least one edit),
/// comparing case-insensitively with `-` and `_` treated alike.
///
/// ```
/// use dpx::config::suggest::nearest;
/// assert_eq!(nearest("lerning_rate", ["learning_rate", "epochs"]), Some("learning_rate"));
/// assert_eq!(nearest("poison", ["poisson", "shuffle"]), Some("poisson"));
/// assert_eq!(nearest("zzzz", ["epochs", "steps"]), None);
/// ```
pub fn nearest<'a>(typed: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let norm = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    let typed_n = norm(typed);
    let mut best: Option<(usize, &'a str)> = None;
    for cand in candidates {
        let d = strsim::osa_distance(&typed_n, &norm(cand));
        let limit = (typed_n.chars().count().max(cand.chars().count()) / 3).max(1);
        if d <= limit && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, cand));
        }
    }
    best.map(|(_, c)| c)
}

/// The names in backticks after "expected" in a serde message such as
/// "unknown field `lerning_rate`, expected one of `epochs`, `steps`" (also "expected `a` or `b`").
/// Returns the offending name and the expected names.
pub(crate) fn parse_unknown(message: &str) -> Option<(String, Vec<String>)> {
    let rest = message
        .strip_prefix("unknown field ")
        .or_else(|| message.strip_prefix("unknown variant "))?;
    let mut parts = rest.split('`');
    parts.next()?; // text before the first backtick
    let name = parts.next()?.to_string();
    let after = rest.splitn(3, '`').nth(2)?;
    let expected = after
        .split_once("expected")
        .map(|(_, e)| e)
        .unwrap_or("")
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    Some((name, expected))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_prefers_the_smallest_distance() {
        assert_eq!(
            nearest("epoch", ["epochs", "steps", "eval_every_epochs"]),
            Some("epochs")
        );
        // Transposition is one edit.
        assert_eq!(nearest("dleta", ["delta", "epsilon"]), Some("delta"));
        // Hyphen and underscore are the same.
        assert_eq!(
            nearest("fashion_mnist", ["mnist", "fashion-mnist"]),
            Some("fashion-mnist")
        );
        assert_eq!(nearest("x", Vec::<&str>::new()), None);
    }

    #[test]
    fn parses_serde_unknown_messages() {
        let (name, exp) =
            parse_unknown("unknown field `lerning_rate`, expected one of `epochs`, `steps`")
                .expect("parses");
        assert_eq!(name, "lerning_rate");
        assert_eq!(exp, vec!["epochs", "steps"]);
        let (name, exp) =
            parse_unknown("unknown variant `sgdd`, expected `sgd` or `momentum`").expect("parses");
        assert_eq!(name, "sgdd");
        assert_eq!(exp, vec!["sgd", "momentum"]);
        let (name, exp) = parse_unknown("unknown field `x`, there are no fields").expect("parses");
        assert_eq!(name, "x");
        assert!(exp.is_empty());
        assert!(parse_unknown("invalid type: string \"a\", expected f64").is_none());
    }
}
