//! `dpx eval MODEL CONFIG`: score a saved model (`seeds/<seed>.model.safetensors`) on the test
//! (and validation) set of a config, with the config's data preparation.
//!
//! The model is built from the config as `dpx run` builds it; the file must hold exactly its
//! tensors with their shapes, and when the file names the architecture it was saved from, that
//! must be the config's. Evaluating a released model is post-processing: it costs no privacy.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use super::bad_input;
use super::run::build_experiment;
use crate::model::artifact::{read_metadata, saved_spec};

/// `dpx eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The saved model (a `.safetensors` file written by `dpx run`).
    pub model: PathBuf,
    /// The experiment config whose data (and architecture) to use.
    pub config: PathBuf,
    /// The data directory (default: `$DPX_DATA_DIR`, else `data`).
    #[arg(long, env = "DPX_DATA_DIR", value_parser = super::parse_data_dir)]
    pub data_dir: Option<PathBuf>,
    /// Worker threads (default: one per core). Results do not depend on it.
    #[arg(long, value_parser = super::parse_threads)]
    pub threads: Option<usize>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = EvalFormat::Table)]
    pub format: EvalFormat,
}

/// How `dpx eval` prints its scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EvalFormat {
    Table,
    Json,
}

/// Run `dpx eval`.
pub fn run(args: EvalArgs) -> anyhow::Result<ExitCode> {
    let exp = build_experiment(&args.config, args.data_dir.as_deref())?;
    let model = &exp.model;
    let bytes = model.read_model_file(&args.model).map_err(bad_input)?;
    let meta = read_metadata(&bytes, &args.model).map_err(bad_input)?;
    if let Some(saved) = meta
        .as_ref()
        .map(|m| saved_spec(m, &args.model))
        .transpose()
        .map_err(bad_input)?
        .flatten()
    {
        let built = model.spec();
        if saved.input_shape != built.input_shape
            || saved.layers != built.layers
            || saved.loss != built.loss
        {
            return Err(bad_input(anyhow::anyhow!(
                "{}: saved from another architecture than {} builds ({} layers vs {}); evaluate it with the config that trained it",
                args.model.display(),
                args.config.display(),
                saved.layers.len(),
                built.layers.len()
            )));
        }
    }
    let params = model
        .params_from_safetensors(&bytes, &args.model)
        .map_err(bad_input)?;
    let pool = super::thread_pool(args.threads)?;
    let mut scores: Vec<(&str, usize, f64, f64)> = Vec::new();
    let sets = [
        ("test", Some(&exp.data.test)),
        ("validation", exp.data.validation.as_ref()),
    ];
    for (name, set) in sets {
        let Some(set) = set else { continue };
        if set.is_empty() {
            continue;
        }
        let (loss, accuracy) =
            pool.install(|| model.evaluate(params.view(), set.features.view(), &set.labels))?;
        scores.push((name, set.len(), accuracy, loss));
    }
    match args.format {
        EvalFormat::Table => {
            println!(
                "{:<12} {:>9} {:>10} {:>10}",
                "set", "examples", "accuracy", "loss"
            );
            for (name, n, acc, loss) in &scores {
                println!("{name:<12} {n:>9} {acc:>10.4} {loss:>10.4}");
            }
        }
        EvalFormat::Json => {
            let sets: Vec<serde_json::Value> = scores
                .iter()
                .map(|(name, n, acc, loss)| {
                    serde_json::json!({"set": name, "examples": n, "accuracy": acc, "loss": loss})
                })
                .collect();
            let out = serde_json::json!({
                "model": args.model.display().to_string(),
                "config": args.config.display().to_string(),
                "metadata": meta,
                "scores": sets,
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
    }
    Ok(ExitCode::SUCCESS)
}
