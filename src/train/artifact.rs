//! What a finished seed leaves besides its CSVs (room: `train`): the trained model as a
//! safetensors file ([`crate::model::artifact`]), with metadata saying what run produced it and
//! what privacy guarantee covers it.
//!
//! A saved model is post-processing of the private run: it costs no privacy beyond the run's ε,
//! and holds no random-number state (see docs/security.md).

use std::collections::BTreeMap;

use serde_json::Value;

use super::prepare::Experiment;
use super::seed::SeedResult;
use crate::model::artifact::ArtifactError;

/// The file name of seed `seed`'s saved model inside `seeds/`.
pub fn model_file_name(seed: u64) -> String {
    format!("{seed}.model.safetensors")
}

/// The safetensors bytes of a finished seed's model, or `None` when the run has no layered
/// model (`[accelerated]`). Same config, seed and binary: same bytes.
pub fn model_file_bytes(
    exp: &Experiment,
    result: &SeedResult,
) -> Result<Option<Vec<u8>>, ArtifactError> {
    let Some(params) = &result.params else {
        return Ok(None);
    };
    let s = &result.summary;
    let mut meta: BTreeMap<String, Value> = BTreeMap::new();
    meta.insert("dpx_version".into(), env!("CARGO_PKG_VERSION").into());
    meta.insert("dpx_commit".into(), env!("DPX_GIT_COMMIT").into());
    meta.insert("experiment".into(), exp.spec.name.clone().into());
    meta.insert("seed".into(), s.seed.into());
    meta.insert("steps".into(), s.steps.into());
    meta.insert("final_test_accuracy".into(), finite(s.final_test_accuracy));
    meta.insert("epsilon".into(), s.epsilon.map_or(Value::Null, finite));
    meta.insert("delta".into(), s.delta.map_or(Value::Null, finite));
    meta.insert(
        "accountant".into(),
        s.accountant.clone().map_or(Value::Null, Value::from),
    );
    meta.insert("epsilon_guaranteed".into(), s.epsilon_guaranteed.into());
    meta.insert("private".into(), exp.plan.privacy.is_some().into());
    meta.insert(
        "trained_on".into(),
        match exp.spec.data.public_split {
            None => format!("{} training examples", exp.data.train.len()),
            Some(split) => format!(
                "{} training examples: the {} part of data.public_fraction = {}",
                exp.data.train.len(),
                split.train_on.name(),
                split.fraction
            ),
        }
        .into(),
    );
    meta.insert(
        "input_shape".into(),
        exp.model.spec().input_shape.clone().into(),
    );
    exp.model.to_safetensors(params.view(), &meta).map(Some)
}

fn finite(v: f64) -> Value {
    serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
}
