//! docs/config.md documents exactly the keys of the schema: every key of the raw structs has a
//! row, and every row names a real key.

use std::collections::BTreeSet;
use std::path::Path;

use dpx::config::RawConfig;

/// Dotted paths of every leaf key (tables of an array are `name[].key`).
fn walk(prefix: &str, value: &toml::Value, out: &mut BTreeSet<String>) {
    match value {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                walk(&path, v, out);
            }
        }
        toml::Value::Array(items) if items.iter().any(|i| i.is_table()) => {
            // An array of tables is documented as a key of its own and by its members.
            out.insert(prefix.to_string());
            for item in items {
                walk(&format!("{prefix}[]"), item, out);
            }
        }
        _ => {
            out.insert(prefix.to_string());
        }
    }
}

fn schema_keys() -> BTreeSet<String> {
    let value = toml::Value::try_from(RawConfig::every_key_example()).expect("serialises");
    let mut keys = BTreeSet::new();
    walk("", &value, &mut keys);
    // Sub-tables are documented by their members (`data.synthetic.n_train`, ...), not as rows.
    keys
}

/// Keys of the reference tables: the first cell of each row, in backticks.
fn documented_keys() -> BTreeSet<String> {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/config.md"))
            .expect("docs/config.md exists");
    text.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once("` |"))
        .map(|(k, _)| k.to_string())
        .collect()
}

#[test]
fn every_schema_key_is_documented() {
    let documented = documented_keys();
    let missing: Vec<_> = schema_keys().difference(&documented).cloned().collect();
    assert!(
        missing.is_empty(),
        "keys missing from docs/config.md: {missing:?}"
    );
}

#[test]
fn every_documented_key_exists() {
    let schema = schema_keys();
    let unknown: Vec<_> = documented_keys().difference(&schema).cloned().collect();
    assert!(
        unknown.is_empty(),
        "docs/config.md documents unknown keys: {unknown:?}"
    );
}

#[test]
fn the_walk_sees_nested_keys() {
    // Guards the two tests above against a walk that finds nothing.
    let keys = schema_keys();
    for k in [
        "experiment.name",
        "data.synthetic.n_train",
        "model.layers",
        "model.layers[].kind",
        "train.lr_schedule.kind",
        "privacy.delta",
    ] {
        assert!(keys.contains(k), "{k} not found in {keys:?}");
    }
    assert!(keys.len() > 60, "{} keys", keys.len());
}

#[test]
fn the_documented_example_is_valid() {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/config.md"))
            .expect("docs/config.md exists");
    let example = text
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a toml example");
    dpx::config::load_str(example, Path::new("docs/config.md")).unwrap_or_else(|e| panic!("{e}"));
}
