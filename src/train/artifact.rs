//! What a finished seed leaves besides its CSVs (room: `train`): the trained model as a
//! safetensors file ([`crate::model::artifact`]), with metadata saying what run produced it and
//! what privacy guarantee covers it; with `train.ema_decay` also the parameters' moving average,
//! and with `output.save_model_every_evals` the parameters at every k-th evaluation.
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

/// The file name of seed `seed`'s averaged parameters (`train.ema_decay`).
pub fn ema_model_file_name(seed: u64) -> String {
    format!("{seed}.ema.model.safetensors")
}

/// The file name of seed `seed`'s parameters after `step` steps
/// (`output.save_model_every_evals`).
pub fn step_model_file_name(seed: u64, step: u64) -> String {
    format!("{seed}.step{step}.model.safetensors")
}

/// Whether `name` is one of seed `seed`'s model files (final, averaged or kept at a step).
pub fn is_model_file_of(name: &str, seed: u64) -> bool {
    let Some(rest) = name.strip_prefix(&format!("{seed}.")) else {
        return false;
    };
    let Some(kind) = rest.strip_suffix("model.safetensors") else {
        return false;
    };
    kind.is_empty()
        || kind == "ema."
        || kind
            .strip_prefix("step")
            .and_then(|k| k.strip_suffix('.'))
            .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
}

/// Every model file a finished seed leaves, as (file name in `seeds/`, safetensors bytes): the
/// final parameters, their moving average (`train.ema_decay`) and the parameters kept at every
/// k-th evaluation (`output.save_model_every_evals`). Empty when the run has no layered model
/// (`[accelerated]`). Same config, seed and binary: same bytes.
pub fn model_files(
    exp: &Experiment,
    result: &SeedResult,
) -> Result<Vec<(String, Vec<u8>)>, ArtifactError> {
    let Some(params) = &result.params else {
        return Ok(Vec::new());
    };
    let s = &result.summary;
    let mut files = Vec::new();
    let final_meta = metadata(exp, result, "final", s.steps, s.final_test_accuracy);
    files.push((
        model_file_name(s.seed),
        exp.model.to_safetensors(params.view(), &final_meta)?,
    ));
    if let (Some(ema), Some(acc)) = (&result.ema_params, s.final_ema_test_accuracy) {
        let mut meta = metadata(exp, result, "ema", s.steps, acc);
        if let Some(d) = exp.spec.train.ema_decay {
            meta.insert("ema_decay".into(), finite(d));
        }
        files.push((
            ema_model_file_name(s.seed),
            exp.model.to_safetensors(ema.view(), &meta)?,
        ));
    }
    for snap in &result.snapshots {
        let meta = metadata(exp, result, "step", snap.step, snap.test_accuracy);
        files.push((
            step_model_file_name(s.seed, snap.step),
            exp.model.to_safetensors(snap.params.view(), &meta)?,
        ));
    }
    Ok(files)
}

/// The metadata of one model file of a finished seed: what run produced it, which parameters
/// these are (`final`, `ema` or `step`) after how many steps, their test accuracy, and the
/// privacy guarantee of the whole run (ε is the run's: every file is post-processing of it).
fn metadata(
    exp: &Experiment,
    result: &SeedResult,
    parameters: &str,
    steps: u64,
    test_accuracy: f64,
) -> BTreeMap<String, Value> {
    let s = &result.summary;
    let mut meta: BTreeMap<String, Value> = BTreeMap::new();
    meta.insert("dpx_version".into(), env!("CARGO_PKG_VERSION").into());
    meta.insert("dpx_commit".into(), env!("DPX_GIT_COMMIT").into());
    meta.insert("experiment".into(), exp.spec.name.clone().into());
    meta.insert("seed".into(), s.seed.into());
    meta.insert("steps".into(), steps.into());
    if parameters == "final" {
        meta.insert("final_test_accuracy".into(), finite(test_accuracy));
    } else {
        meta.insert("parameters".into(), parameters.into());
        meta.insert("test_accuracy".into(), finite(test_accuracy));
    }
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
    meta
}

fn finite(v: f64) -> Value {
    serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_file_names_are_recognised_per_seed() {
        for name in [
            model_file_name(3),
            ema_model_file_name(3),
            step_model_file_name(3, 120),
        ] {
            assert!(is_model_file_of(&name, 3), "{name}");
            assert!(!is_model_file_of(&name, 13), "{name}");
            assert!(!is_model_file_of(&name, 30), "{name}");
        }
        for other in [
            "3.metrics.csv",
            "3.checkpoint",
            "3.stepx.model.safetensors",
            "3.step.model.safetensors",
            "3.model.safetensors.tmp",
        ] {
            assert!(!is_model_file_of(other, 3), "{other}");
        }
    }
}
