//! Property tests: any number in any numeric key never makes validation panic; the value is
//! accepted exactly when it lies in the documented range (docs/config.md), and otherwise the
//! error is `OutOfRange` naming that key.

use std::path::Path;

use dpx::config::{self, ConfigError};
use proptest::prelude::*;

const BASE: &str = r#"[experiment]
name = "props"
seeds = [0]

[data]
dataset = "gaussian_mixture"

[model]
architecture = "logistic"

[train]
epochs = 3
expected_batch_size = 64
learning_rate = 0.5

[clip]
clip_norm = 1.0

[privacy]
epsilon = 3.0
delta = 1e-5
"#;

/// A float key: extra settings that make it applicable, and its documented validity range.
struct FloatKey {
    key: &'static str,
    setup: &'static [(&'static str, &'static str)],
    remove: &'static [&'static str],
    valid: fn(f64) -> bool,
}

fn positive(x: f64) -> bool {
    x.is_finite() && x > 0.0
}

const FLOAT_KEYS: &[FloatKey] = &[
    FloatKey {
        key: "privacy.delta",
        setup: &[],
        remove: &[],
        valid: |x| x > 0.0 && x < 1.0,
    },
    FloatKey {
        key: "privacy.epsilon",
        setup: &[],
        remove: &[],
        valid: positive,
    },
    FloatKey {
        key: "train.learning_rate",
        setup: &[],
        remove: &[],
        valid: positive,
    },
    FloatKey {
        key: "clip.clip_norm",
        setup: &[],
        remove: &[],
        valid: positive,
    },
    FloatKey {
        key: "data.max_norm",
        setup: &[],
        remove: &[],
        valid: positive,
    },
    FloatKey {
        key: "data.synthetic.separation",
        setup: &[],
        remove: &[],
        valid: positive,
    },
    FloatKey {
        key: "data.validation_fraction",
        setup: &[],
        remove: &[],
        valid: |x| (0.0..1.0).contains(&x),
    },
    FloatKey {
        key: "model.l2",
        setup: &[],
        remove: &[],
        valid: |x| x.is_finite() && x >= 0.0,
    },
    FloatKey {
        key: "train.momentum",
        setup: &[("train.optimizer", "\"momentum\"")],
        remove: &[],
        valid: |x| (0.0..1.0).contains(&x),
    },
    FloatKey {
        key: "noise.noise_multiplier",
        setup: &[],
        remove: &["privacy.epsilon"],
        valid: positive,
    },
    FloatKey {
        key: "train.lr_schedule.factor",
        setup: &[
            ("train.lr_schedule.kind", "\"step\""),
            ("train.lr_schedule.every_steps", "1"),
        ],
        remove: &[],
        valid: |x| x > 0.0 && x <= 1.0,
    },
    FloatKey {
        key: "train.lr_schedule.final_learning_rate",
        setup: &[("train.lr_schedule.kind", "\"cosine\"")],
        remove: &[],
        // In [0, learning_rate] with learning_rate = 0.5 in BASE.
        valid: |x| (0.0..=0.5).contains(&x),
    },
    FloatKey {
        key: "train.lr_schedule.a",
        setup: &[
            ("train.lr_schedule.kind", "\"inv_sqrt\""),
            ("train.lr_schedule.c", "1.0"),
        ],
        remove: &[],
        valid: positive,
    },
    FloatKey {
        key: "train.lr_schedule.c",
        setup: &[
            ("train.lr_schedule.kind", "\"inv_sqrt\""),
            ("train.lr_schedule.a", "1.0"),
        ],
        remove: &[],
        valid: |x| x.is_finite() && x >= 0.0,
    },
];

/// Integer keys with their documented inclusive ranges (given BASE's other values).
const INT_KEYS: &[(&str, &[&str], i64, i64)] = &[
    ("train.epochs", &[], 1, 1_000_000),
    ("train.steps", &["train.epochs"], 1, 100_000_000),
    ("train.expected_batch_size", &[], 1, 100_000_000),
    ("experiment.seeds", &[], 1, 100_000),
    ("data.synthetic.n_train", &[], 1, 10_000_000),
    ("data.synthetic.n_test", &[], 1, 10_000_000),
    ("data.synthetic.n_features", &[], 1, 65_536),
    // At most n_features + 1 = 21 classes (BASE's default n_features = 20).
    ("data.synthetic.n_classes", &[], 2, 21),
    ("data.synthetic.seed", &[], 0, i64::MAX),
    ("data.subsample", &[], 1, 1_000_000_000),
    ("train.threads", &[], 1, 1024),
    ("train.eval_every_steps", &[], 1, i64::MAX),
];

fn text_with(setup: &[(&str, &str)], remove: &[&str], key: &str, value: toml::Value) -> String {
    let mut table: toml::Table = toml::from_str(BASE).expect("BASE parses");
    for r in remove {
        let (parent, last) = r.rsplit_once('.').expect("dotted");
        table[parent].as_table_mut().expect("table").remove(last);
    }
    for (k, v) in setup {
        let v: toml::Value =
            toml::from_str::<toml::Table>(&format!("x = {v}")).expect("value")["x"].clone();
        config::set(&mut table, k, v).expect("set");
    }
    config::set(&mut table, key, value).expect("set");
    toml::to_string(&table).expect("serialises")
}

fn any_float() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(0.0),
        Just(-0.0),
        Just(1.0),
        Just(f64::MAX),
        Just(f64::MIN_POSITIVE),
        -2.0..2.0f64,
        0.0..1.0f64,
    ]
}

fn any_int() -> impl Strategy<Value = i64> {
    prop_oneof![
        any::<i64>(),
        Just(i64::MIN),
        Just(i64::MAX),
        Just(0i64),
        Just(-1i64),
        -5..30i64,
        0..2_000_000i64,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn float_keys_accept_exactly_their_range(k in 0..FLOAT_KEYS.len(), x in any_float()) {
        let fk = &FLOAT_KEYS[k];
        let text = text_with(fk.setup, fk.remove, fk.key, toml::Value::Float(x));
        let result = config::load_str(&text, Path::new("p.toml"));
        if (fk.valid)(x) {
            prop_assert!(result.is_ok(), "{} = {x:?} rejected: {:?}", fk.key, result.err());
        } else {
            let e = result.expect_err("out of range");
            prop_assert!(
                matches!(&e, ConfigError::OutOfRange { key, .. } if key == fk.key),
                "{} = {x:?}: {e:?}", fk.key
            );
            prop_assert!(e.to_string().starts_with("p.toml: "), "{e}");
        }
    }

    #[test]
    fn integer_keys_accept_exactly_their_range(k in 0..INT_KEYS.len(), x in any_int()) {
        let (key, remove, lo, hi) = INT_KEYS[k];
        let text = text_with(&[], remove, key, toml::Value::Integer(x));
        let result = config::load_str(&text, Path::new("p.toml"));
        if (lo..=hi).contains(&x) {
            prop_assert!(result.is_ok(), "{key} = {x} rejected: {:?}", result.err());
        } else {
            let e = result.expect_err("out of range");
            prop_assert!(
                matches!(&e, ConfigError::OutOfRange { key: k, .. } if k == key),
                "{key} = {x}: {e:?}"
            );
        }
    }

    /// The same through overrides (`dpx sweep`): never a panic, the same verdict.
    #[test]
    fn overrides_agree_with_the_file(k in 0..FLOAT_KEYS.len(), x in any_float()) {
        let fk = &FLOAT_KEYS[k];
        let base = text_with(fk.setup, fk.remove, fk.key, toml::Value::Float(1.0e-3));
        let via_override = config::load_str_with_overrides(
            &base,
            Path::new("p.toml"),
            &[(fk.key.to_string(), toml::Value::Float(x))],
        );
        prop_assert_eq!(via_override.is_ok(), (fk.valid)(x), "{} = {:?}", fk.key, x);
        if let Err(e) = via_override {
            prop_assert!(e.location().from_override, "{e}");
        }
    }

    /// Arbitrary text never panics the loader.
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = config::load_str(&text, Path::new("p.toml"));
        let _ = config::load_str(&format!("{BASE}\n{text}"), Path::new("p.toml"));
    }
}
