//! docs/outputs.md lists every column of `metrics.csv` and `summary.csv` (the serialised fields
//! of `src/train/metrics.rs`) and every field of `report.json`.

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `pub name:` fields of `pub struct <name>` in a Rust source file.
fn struct_fields(source: &str, name: &str) -> Vec<String> {
    let start = source
        .find(&format!("pub struct {name} {{"))
        .unwrap_or_else(|| panic!("struct {name}"));
    let body = &source[start..];
    let end = body.find("\n}").unwrap();
    body[..end]
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub "))
        .filter_map(|l| l.split_once(':').map(|(f, _)| f.trim().to_string()))
        .filter(|f| !f.starts_with("struct"))
        .collect()
}

#[test]
fn every_csv_column_is_documented_with_its_unit() {
    let source = std::fs::read_to_string(root().join("src/train/metrics.rs")).unwrap();
    let doc = std::fs::read_to_string(root().join("docs/outputs.md")).unwrap();
    for s in ["MetricsRow", "SummaryRow"] {
        let fields = struct_fields(&source, s);
        assert!(fields.len() > 10, "{s}: {fields:?}");
        for f in fields {
            assert!(
                doc.contains(&format!("`{f}`")),
                "docs/outputs.md does not list the {s} column `{f}`"
            );
        }
    }
}

#[test]
fn every_report_json_field_is_documented() {
    let doc = std::fs::read_to_string(root().join("docs/outputs.md")).unwrap();
    for f in [
        "swept_keys",
        "points_without_results",
        "final_test_accuracy",
        "tuning_cost",
        "composed_rdp_epsilon",
        "basic_composition_epsilon",
        "poisson_repetition_epsilon",
        "largest_single_epsilon",
        "plots",
    ] {
        assert!(doc.contains(f), "docs/outputs.md lacks `{f}`");
    }
}

#[test]
fn the_checkpoint_file_is_documented_where_the_run_writes_it() {
    let run = std::fs::read_to_string(root().join("src/cli/output_dir.rs")).unwrap();
    let doc = std::fs::read_to_string(root().join("docs/outputs.md")).unwrap();
    assert!(
        run.contains("self.seeds().join(format!(\"{seed}.checkpoint\"))"),
        "src/cli/output_dir.rs no longer names seeds/<seed>.checkpoint: update docs/outputs.md"
    );
    assert!(
        doc.contains("| `seeds/<seed>.checkpoint` |"),
        "docs/outputs.md does not list seeds/<seed>.checkpoint"
    );
}
